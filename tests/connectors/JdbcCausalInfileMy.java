// Connector/J cells of the MariaDB causal matrix (#34) for LOAD DATA LOCAL INFILE. Run as a
// single source file:
// java -cp mariadb-java-client.jar JdbcCausalInfileMy.java URL USER PASSWORD TABLE FIRST_ID
// URL sets allowLocalInfile=true, allowMultiQueries=true and client- or server-side prepare
// (useServerPrepStmts). For Connector/J LOAD DATA is a text-only statement: it prepares on the
// server only statements starting with SELECT, UPDATE, INSERT, DELETE, REPLACE, DO or CALL, so
// a PreparedStatement of LOAD DATA goes as a text query under useServerPrepStmts=true too
// (MariaDB itself would prepare it; the `mysql` crate's cells cover COM_STMT_EXECUTE). The
// replica's SQL thread is stopped. Paths: a Statement, a PreparedStatement, first in a
// multi-statement text (Connector/J sends a file only for a text that starts with the LOAD DATA
// naming it: after a SELECT it refuses the request as a "malicious proxy"'s), between BEGIN and
// COMMIT, and setAutoCommit(false) ... commit(). For each, a fresh connection reads row n (on
// the replica: none yet), loads a file holding row n, reads it back, hands its token (SHOW
// querypilot.causal_token) to a second connection by SET and to a third as its connection
// attribute. Prints `PATH BEFORE_COUNT BEFORE_SERVER WRITER_COUNT WRITER_SERVER OTHER_COUNT
// OTHER_SERVER ATTR_COUNT ATTR_SERVER` (`@@server_id` of each read).
import java.nio.file.*;
import java.sql.*;

public class JdbcCausalInfileMy {
    static String read(Connection c, String table, int n) throws SQLException {
        String sql = "SELECT COUNT(*), @@server_id FROM " + table + " WHERE id = ?";
        try (PreparedStatement p = c.prepareStatement(sql)) {
            p.setInt(1, n);
            try (ResultSet rs = p.executeQuery()) {
                rs.next();
                return rs.getLong(1) + " " + rs.getLong(2);
            }
        }
    }

    static void text(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
            while (s.getMoreResults() || s.getUpdateCount() != -1) {
            }
        }
    }

    static void load(Connection c, String path, String load) throws SQLException {
        switch (path) {
            case "statement":
                text(c, load);
                break;
            case "prepared":
                try (PreparedStatement p = c.prepareStatement(load)) {
                    p.execute();
                }
                break;
            case "multi":
                text(c, load + "; SELECT 1");
                break;
            case "begin-commit":
                text(c, "BEGIN");
                text(c, load);
                text(c, "COMMIT");
                break;
            default:
                c.setAutoCommit(false);
                text(c, load);
                c.commit();
                c.setAutoCommit(true);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], t = args[3];
        int n = Integer.parseInt(args[4]);
        Path dir = Files.createTempDirectory("qp_infile");
        for (String path : new String[] {"statement", "prepared", "multi", "begin-commit", "autocommit-off"}) {
            n++;
            Path file = dir.resolve("row" + n + ".csv");
            Files.write(file, (n + "\n").getBytes());
            String load = "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE " + t;
            try (Connection c = DriverManager.getConnection(url, user, password);
                 Connection o = DriverManager.getConnection(url, user, password)) {
                String before = read(c, t, n);
                load(c, path, load);
                String mine = read(c, t, n);
                String token;
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW querypilot.causal_token")) {
                    rs.next();
                    token = rs.getString(1);
                }
                text(o, "SET querypilot.causal_token = '" + token + "'");
                String attr;
                String withToken = url + "&connectionAttributes=querypilot.causal_token:" + token;
                try (Connection a = DriverManager.getConnection(withToken, user, password)) {
                    attr = read(a, t, n);
                }
                System.out.println(path + " " + before + " " + mine + " " + read(o, t, n) + " " + attr);
            }
            Files.delete(file);
        }
        Files.delete(dir);
    }
}
