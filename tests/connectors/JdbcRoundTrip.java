// MariaDB Connector/J (JDBC) through the router's MySQL listener: connect, client-side and
// server-side prepared statements with typed parameters, batches, commit and rollback with
// autocommit off, and a duplicate-key error. Run as a single source file:
//   java -cp mariadb-java-client.jar JdbcRoundTrip.java URL USER PASSWORD TABLE
// Prints one line per check; the Rust test compares them.
import java.math.BigDecimal;
import java.sql.*;

public class JdbcRoundTrip {
    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], table = args[3];
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            try (Statement s = c.createStatement()) {
                try (ResultSet rs = s.executeQuery("SELECT 1 + 1")) {
                    rs.next();
                    System.out.println("sum " + rs.getLong(1));
                }
                s.execute("CREATE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(10,2), at TIMESTAMP NULL)");
            }
            c.setAutoCommit(false);
            try (PreparedStatement p = c.prepareStatement("INSERT INTO " + table + " (id, name, amount, at) VALUES (?, ?, ?, ?)")) {
                Object[][] rows = {
                    {1, "it's \"quoted\" \\ back", new BigDecimal("-12.34"), Timestamp.valueOf("2026-12-03 04:05:06")},
                    {2, "ünïcödé ✓ 🐘", new BigDecimal("99999999.99"), null},
                    {3, null, null, null},
                };
                for (Object[] r : rows) {
                    p.setInt(1, (Integer) r[0]);
                    p.setString(2, (String) r[1]);
                    p.setBigDecimal(3, (BigDecimal) r[2]);
                    p.setTimestamp(4, (Timestamp) r[3]);
                    p.addBatch();
                }
                p.executeBatch();
            }
            c.commit();
            try (PreparedStatement p = c.prepareStatement("SELECT id, name, amount, at FROM " + table + " WHERE id >= ? ORDER BY id")) {
                p.setInt(1, 1);
                try (ResultSet rs = p.executeQuery()) {
                    while (rs.next()) {
                        System.out.println("row " + rs.getInt(1) + "|" + rs.getString(2) + "|" + rs.getBigDecimal(3) + "|" + rs.getTimestamp(4));
                    }
                }
            }
            try (PreparedStatement p = c.prepareStatement("UPDATE " + table + " SET name = ? WHERE id = ?")) {
                p.setString(1, "rolled back");
                p.setInt(2, 1);
                System.out.println("updated " + p.executeUpdate());
            }
            c.rollback();
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT name FROM " + table + " WHERE id = 1")) {
                rs.next();
                System.out.println("after rollback " + rs.getString(1));
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO " + table + " (id) VALUES (?)")) {
                p.setInt(1, 2);
                p.executeUpdate();
                System.out.println("duplicate accepted");
            } catch (SQLIntegrityConstraintViolationException e) {
                System.out.println("duplicate " + e.getErrorCode() + " " + e.getSQLState());
            }
            c.rollback();
            c.setAutoCommit(true);
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE " + table);
            }
        }
        System.out.println("closed");
    }
}
