// Connector/J cells of the MariaDB causal matrix (#34). Run as a single source file:
// java -cp mariadb-java-client.jar JdbcCausalMatrixMy.java URL USER PASSWORD TABLE FIRST_ID
// URL decides client-side (default) or server-side prepare (useServerPrepStmts=true). The
// replica's SQL thread is stopped. For each write kind (plain INSERT, INSERT ... WITH, CALL, a
// trigger's write, DO of a function that inserts, an XA two-phase commit), PreparedStatements
// write row n, one per statement of the kind; the writer reads it back, hands its token
// (SHOW querypilot.causal_token) to a second connection, which reads it too, and to a third as
// its connection attribute (`connectionAttributes=querypilot.causal_token:TOKEN`: Connector/J
// splits each pair at its first ':', so the token's own ':' stays in the value). Prints
// `KIND WRITER_COUNT WRITER_SERVER OTHER_COUNT OTHER_SERVER ATTR_COUNT ATTR_SERVER`
// (`@@server_id` of each read), then `attr_bad ERROR_CODE` for an invalid token as attribute.
import java.sql.*;

public class JdbcCausalMatrixMy {
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

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], t = args[3];
        int n = Integer.parseInt(args[4]);
        String[][] writes = {
            {"plain", "INSERT INTO " + t + " VALUES (?)"},
            {"cte", "INSERT INTO " + t + " WITH c AS (SELECT ? AS id) SELECT id FROM c"},
            {"call", "CALL " + t + "_p(?)"},
            {"trigger", "INSERT INTO " + t + "_src VALUES (?)"},
            {"do", "DO " + t + "_f(?)"},
            {"xa", "XA START 'qp_j'", "INSERT INTO " + t + " VALUES (?)", "XA END 'qp_j'", "XA PREPARE 'qp_j'",
                "XA COMMIT 'qp_j'"},
        };
        for (String[] w : writes) {
            n++;
            try (Connection c = DriverManager.getConnection(url, user, password);
                 Connection o = DriverManager.getConnection(url, user, password)) {
                for (int i = 1; i < w.length; i++) {
                    try (PreparedStatement p = c.prepareStatement(w[i])) {
                        if (w[i].contains("?")) {
                            p.setInt(1, n);
                        }
                        p.execute();
                    }
                }
                String mine = read(c, t, n);
                String token;
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW querypilot.causal_token")) {
                    rs.next();
                    token = rs.getString(1);
                }
                try (Statement s = o.createStatement()) {
                    s.execute("SET querypilot.causal_token = '" + token + "'");
                }
                String attr;
                try (Connection a = DriverManager.getConnection(withToken(url, token), user, password)) {
                    attr = read(a, t, n);
                }
                System.out.println(w[0] + " " + mine + " " + read(o, t, n) + " " + attr);
            }
        }
        try (Connection a = DriverManager.getConnection(withToken(url, "nonsense"), user, password)) {
            System.out.println("attr_bad none");
        } catch (SQLException e) {
            System.out.println("attr_bad " + e.getErrorCode());
        }
    }

    static String withToken(String url, String token) {
        return url + "&connectionAttributes=querypilot.causal_token:" + token;
    }
}
