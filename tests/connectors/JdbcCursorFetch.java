import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;

/**
 * Issue #19 case 4 through MariaDB Connector/J: an UPDATE sent while a fetch-size result set
 * is still open (useCursorFetch=true in the URL, setFetchSize(1)) must never run on the
 * replica, whether autocommit is off (the read opened a transaction) or on.
 *
 * Usage: JdbcCursorFetch URL USER PASSWORD TABLE AUTOCOMMIT. The table holds rows 1..N with
 * v = 10 in row 1. Prints "read S" (the @@server_id of the open result set's first row), "rows
 * N" (rows read from it after the UPDATE), "update S" (the @@server_id seen by the connection
 * right after the UPDATE, inside the transaction when autocommit is off) and "final V".
 */
public class JdbcCursorFetch {
    public static void main(String[] args) throws Exception {
        String table = args[3];
        boolean autocommit = Boolean.parseBoolean(args[4]);
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
            c.setAutoCommit(autocommit);
            try (PreparedStatement ps = c.prepareStatement("SELECT id, @@server_id FROM " + table + " ORDER BY id")) {
                ps.setFetchSize(1);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    System.out.println("read " + rs.getLong(2));
                    try (PreparedStatement up = c.prepareStatement("UPDATE " + table + " SET v = v + 1 WHERE id = ?")) {
                        up.setInt(1, 1);
                        up.executeUpdate();
                    }
                    int rows = 1;
                    while (rs.next()) {
                        rows++;
                    }
                    System.out.println("rows " + rows);
                }
            }
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT @@server_id")) {
                rs.next();
                System.out.println("update " + rs.getLong(1));
            }
            if (!autocommit) {
                c.commit();
            }
            try (Statement st = c.createStatement();
                 ResultSet rs = st.executeQuery("SELECT v FROM " + table + " WHERE id = 1")) {
                rs.next();
                System.out.println("final " + rs.getLong(1));
            }
            if (!autocommit) {
                c.commit();
            }
        }
    }
}
