import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;

/**
 * MariaDB Connector/J read-modify-write transactions through a read/write split (#19):
 * setAutoCommit(false), as every Spring @Transactional does, makes the SELECT part of the
 * transaction, so it must run where the UPDATE that follows it runs, on the primary.
 *
 * Usage: JdbcReadModifyWrite URL USER PASSWORD TABLE ROUNDS. Prints "round N server S A" per
 * round (the @@server_id that answered before and after the UPDATE) and the final value.
 */
public class JdbcReadModifyWrite {
    public static void main(String[] args) throws Exception {
        String table = args[3];
        int rounds = Integer.parseInt(args[4]);
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
            c.setAutoCommit(false);
            for (int i = 0; i < rounds; i++) {
                long v;
                long server;
                try (PreparedStatement ps = c.prepareStatement("SELECT v, @@server_id FROM " + table + " WHERE id = ?")) {
                    ps.setInt(1, 1);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        v = rs.getLong(1);
                        server = rs.getLong(2);
                    }
                }
                try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET v = ? WHERE id = ?")) {
                    ps.setLong(1, v + 1);
                    ps.setInt(2, 1);
                    ps.executeUpdate();
                }
                long after;
                try (ResultSet rs = c.createStatement().executeQuery("SELECT @@server_id")) {
                    rs.next();
                    after = rs.getLong(1);
                }
                c.commit();
                System.out.println("round " + i + " server " + server + " " + after);
            }
            try (ResultSet rs = c.createStatement().executeQuery("SELECT v FROM " + table + " WHERE id = 1")) {
                rs.next();
                System.out.println("final " + rs.getLong(1));
            }
            c.commit();
        }
    }
}
