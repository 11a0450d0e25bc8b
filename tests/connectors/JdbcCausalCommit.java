// PgJDBC's commit() through the router (#34): PgJDBC sends COMMIT as Parse/Bind/Execute/Sync.
// Run as a single source file: java -cp postgresql.jar JdbcCausalCommit.java URL USER PASSWORD
// TABLE ID. Replay is paused on the standby and the primary's WAL is ahead of it. A transaction
// that only read, then one that wrote row ID through TABLE_outer (a STABLE function calling a
// VOLATILE one that inserts), each followed by a read in autocommit. Prints `CASE RECOVERY SEEN`
// (see causal_commit.py).
import java.sql.*;

public class JdbcCausalCommit {
    static void read(Connection c, String table, String name, int id) throws SQLException {
        String sql = "SELECT pg_is_in_recovery(), count(*) FROM " + table + " WHERE id = ?";
        try (PreparedStatement p = c.prepareStatement(sql)) {
            p.setInt(1, id);
            try (ResultSet rs = p.executeQuery()) {
                rs.next();
                String seen = id == 0 ? "-" : (rs.getLong(2) == 1 ? "seen" : "missed");
                System.out.println(name + " " + (rs.getBoolean(1) ? "t" : "f") + " " + seen);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], table = args[3];
        int id = Integer.parseInt(args[4]);
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            for (int writes = 0; writes < 2; writes++) {
                int row = writes == 1 ? id : 0;
                c.setAutoCommit(false);
                String sql = writes == 1 ? "SELECT " + table + "_outer(?)" : "SELECT count(*) FROM " + table + " WHERE id >= ?";
                try (PreparedStatement p = c.prepareStatement(sql)) {
                    p.setInt(1, row);
                    p.executeQuery().close();
                }
                c.commit();
                c.setAutoCommit(true);
                read(c, table, "jdbc commit() " + (writes == 1 ? "wrote" : "read-only"), row);
            }
        }
    }
}
