// PgJDBC read-only transactions through the router (#34), shaped as Spring's
// @Transactional(readOnly = true) drives them: setAutoCommit(false) + setReadOnly(true), after
// which PgJDBC sends BEGIN READ ONLY in the same batch as the first query. Run as a single
// source file: java -cp postgresql.jar JdbcReadOnly.java URL USER PASSWORD TABLE PHASE ID
// PHASE paused: the connection first writes row ID, so its transaction must run on the primary
// and see it. Prints `CASE RECOVERY SEEN` lines (see causal_readonly.py).
import java.sql.*;

public class JdbcReadOnly {
    static String line(String name, boolean recovery, long count, int id) {
        String seen = id == 0 ? "-" : (count == 1 ? "seen" : "missed");
        return name + " " + (recovery ? "t" : "f") + " " + seen;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], table = args[3], phase = args[4];
        int id = phase.equals("paused") ? Integer.parseInt(args[5]) : 0;
        String inside = "SELECT pg_is_in_recovery(), count(*) FROM " + table + " WHERE id = ?";
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            if (id != 0) {
                try (PreparedStatement w = c.prepareStatement("INSERT INTO " + table + " VALUES (?)")) {
                    w.setInt(1, id);
                    w.executeUpdate();
                }
            }
            c.setAutoCommit(false);
            c.setReadOnly(true);
            // Past prepareThreshold (5) PgJDBC uses a named server-side statement.
            try (PreparedStatement p = c.prepareStatement(inside)) {
                for (int round = 0; round < 7; round++) {
                    p.setInt(1, id);
                    try (ResultSet rs = p.executeQuery()) {
                        rs.next();
                        if (round == 0 || round == 6) {
                            System.out.println(line("jdbc readOnly round " + round, rs.getBoolean(1), rs.getLong(2), id));
                        }
                    }
                    c.commit();
                }
            }
            c.setReadOnly(false);
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT pg_is_in_recovery()")) {
                rs.next();
                System.out.println("jdbc read-write " + (rs.getBoolean(1) ? "t" : "f"));
            }
            c.commit();
        }
    }
}
