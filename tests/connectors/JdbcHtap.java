// MariaDB Connector/J (JDBC) on a MariaDB pool whose translated statement runs on a
// PostgreSQL-protocol pool (#24): the server id before and after, the translated statement as a
// Statement and as a PreparedStatement (server-side with useServerPrepStmts=true), NULLs, and
// the refusal inside a transaction (autocommit off). Run as a single source file:
//   java -cp mariadb-java-client.jar JdbcHtap.java URL USER PASSWORD ORIGINAL_WITH_?
// Prints one line per check; the Rust test compares them.
import java.sql.*;

public class JdbcHtap {
    static String row(ResultSet rs) throws SQLException {
        return rs.getString(1) + "|" + rs.getBigDecimal(2) + "|" + rs.getString(3) + "|" + rs.getTimestamp(4) + "|" + rs.getInt(5);
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], query = args[3];
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            try (Statement s = c.createStatement()) {
                try (ResultSet rs = s.executeQuery("SELECT @@server_id")) {
                    rs.next();
                    System.out.println("server " + rs.getLong(1));
                }
                try (ResultSet rs = s.executeQuery(query.replace("?", "1"))) {
                    rs.next();
                    System.out.println("text " + row(rs));
                }
            }
            try (PreparedStatement p = c.prepareStatement(query)) {
                for (int id : new int[] {1, 2}) {
                    p.setInt(1, id);
                    try (ResultSet rs = p.executeQuery()) {
                        rs.next();
                        System.out.println("prepared " + row(rs));
                    }
                }
            }
            c.setAutoCommit(false);
            try (PreparedStatement p = c.prepareStatement(query)) {
                p.setInt(1, 1);
                p.executeQuery();
                System.out.println("ran inside a transaction");
            } catch (SQLException e) {
                System.out.println("refused " + e.getErrorCode() + " " + e.getSQLState());
            }
            c.rollback();
            c.setAutoCommit(true);
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT @@server_id")) {
                rs.next();
                System.out.println("server " + rs.getLong(1));
            }
        }
    }
}
