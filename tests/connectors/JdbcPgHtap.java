// PgJDBC on a PostgreSQL pool whose translated statement runs on a MySQL-protocol pool (#24):
// pg_is_in_recovery() before and after, the translated statement as a Statement and as a
// PreparedStatement executed past prepareThreshold (unnamed, then named server-side statements),
// types and NULLs, and the refusal inside a transaction (autocommit off). Run as a single source file:
//   java -cp postgresql.jar JdbcPgHtap.java URL USER PASSWORD ORIGINAL_WITH_?
// Prints one line per check; the Rust test compares them.
import java.sql.*;

public class JdbcPgHtap {
    static String row(ResultSet rs) throws SQLException {
        return rs.getString(1) + "|" + rs.getBigDecimal(2) + "|" + rs.getString(3) + "|" + rs.getTimestamp(4) + "|"
            + rs.getObject(5) + "|" + rs.getLong(6);
    }

    static void recovery(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT pg_is_in_recovery()")) {
            rs.next();
            System.out.println("recovery " + rs.getBoolean(1));
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], query = args[3];
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            recovery(c);
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(query.replace("?", "1"))) {
                rs.next();
                System.out.println("text " + row(rs));
            }
            try (PreparedStatement p = c.prepareStatement(query)) {
                // Past prepareThreshold (5) PgJDBC switches to a named server-side statement.
                for (int round = 0; round < 7; round++) {
                    for (int id : new int[] {1, 2}) {
                        p.setInt(1, id);
                        try (ResultSet rs = p.executeQuery()) {
                            rs.next();
                            String line = "prepared " + row(rs);
                            if (round == 0 || round == 6) {
                                System.out.println(line);
                            }
                        }
                    }
                }
            }
            c.setAutoCommit(false);
            recovery(c);
            try (PreparedStatement p = c.prepareStatement(query)) {
                p.setInt(1, 1);
                p.executeQuery();
                System.out.println("ran inside a transaction");
            } catch (SQLException e) {
                System.out.println("refused " + e.getSQLState());
            }
            c.rollback();
            c.setAutoCommit(true);
            recovery(c);
        }
    }
}
