// MariaDB Connector/J values that quoting can get wrong (#33). With useServerPrepStmts=false the
// driver interpolates parameters on the client, escaping by the server's NO_BACKSLASH_ESCAPES
// status flag; with true they travel as binary parameters. Run as a single source file:
//   java -cp mariadb-java-client.jar JdbcValues.java URL USER PASSWORD TABLE
// Prints `backend NAME`, then one line per check; the Rust test compares them with MariaDB's.
import java.sql.*;

public class JdbcValues {
    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], t = args[3];
        String[] values = {
            "'", "\\", "\\'", "\\\\'", "''", "%", "_", "a%b_c\\%\\_", "ünïcödé ✓ 🐘 日本",
            "nomatch\\' OR id = 22 --", "x'); DELETE FROM " + t + "; --",
            "\\'; UPDATE " + t + " SET v = 'pwned' -- x", "\"double\" `tick`", "$$dollar$$ $q$",
            "/* c */ #h -- d", "\n\r\t\u001a\b end", "?", "$1",
        };
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            try (Statement s = c.createStatement()) {
                try (ResultSet rs = s.executeQuery("SELECT version()")) {
                    rs.next();
                    System.out.println("backend " + (rs.getString(1).startsWith("PostgreSQL") ? "postgres" : "mariadb"));
                }
                s.execute("CREATE TABLE " + t + " (id INT PRIMARY KEY, v TEXT)");
                s.execute("INSERT INTO " + t + " (id, v) VALUES (22, 'victim')");
            }
            String[] payloads = {"nomatch\\' OR id = 22 --", "nomatch\\' OR id = 22 -- ", "\\' OR id = 22 #"};
            try (PreparedStatement p = c.prepareStatement("UPDATE " + t + " SET v = 'X' WHERE v = ?")) {
                for (String payload : payloads) {
                    p.setString(1, payload);
                    System.out.println("injection updated " + p.executeUpdate());
                }
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " (id, v) VALUES (?, ?)")) {
                for (int i = 0; i < values.length; i++) {
                    p.setInt(1, i + 1);
                    p.setString(2, values[i]);
                    System.out.println("insert " + (i + 1) + " " + p.executeUpdate());
                }
            }
            try (PreparedStatement p = c.prepareStatement("SELECT id, v FROM " + t + " WHERE id >= ? ORDER BY id")) {
                p.setInt(1, 0);
                try (ResultSet rs = p.executeQuery()) {
                    while (rs.next()) {
                        int i = rs.getInt(1);
                        String want = i <= values.length ? values[i - 1] : "victim";
                        System.out.println("value " + i + (want.equals(rs.getString(2)) ? " same" : " differs " + rs.getString(2)));
                    }
                }
            }
            try (PreparedStatement p = c.prepareStatement("SELECT id FROM " + t + " WHERE v = ? ORDER BY id")) {
                for (int i = 0; i < values.length; i++) {
                    p.setString(1, values[i]);
                    StringBuilder found = new StringBuilder();
                    try (ResultSet rs = p.executeQuery()) {
                        while (rs.next()) found.append(' ').append(rs.getInt(1));
                    }
                    System.out.println("found " + (i + 1) + found);
                }
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " (id, v) VALUES (?, ?)")) {
                p.setInt(1, 50);
                p.setString(2, "a\0b");
                p.executeUpdate();
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT v FROM " + t + " WHERE id = 50")) {
                    rs.next();
                    System.out.println("nul stored " + "a\0b".equals(rs.getString(1)));
                }
            } catch (SQLException e) {
                System.out.println("nul refused " + e.getErrorCode());
            }
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE " + t);
            }
        }
        System.out.println("closed");
    }
}
