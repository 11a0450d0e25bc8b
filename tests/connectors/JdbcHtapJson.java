// MariaDB Connector/J against the seed's HTAP translation (#35): the statement
// `SELECT id FROM tags WHERE JSON_OVERLAPS(labels, ?)` as a PreparedStatement (server-side with
// useServerPrepStmts=true), executed once per value with setString. Prints
// `prepared VALUE ids...` (sorted) or `prepared VALUE error CODE SQLSTATE`. Run as a single source file:
//   java -cp mariadb-java-client.jar JdbcHtapJson.java URL USER PASSWORD VALUE...
import java.sql.*;
import java.util.*;

public class JdbcHtapJson {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
             PreparedStatement p = c.prepareStatement("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, ?)")) {
            for (int i = 3; i < args.length; i++) {
                p.setString(1, args[i]);
                try (ResultSet rs = p.executeQuery()) {
                    List<Integer> ids = new ArrayList<>();
                    while (rs.next()) ids.add(rs.getInt(1));
                    Collections.sort(ids);
                    StringBuilder line = new StringBuilder("prepared " + args[i] + " ids");
                    for (int id : ids) line.append(' ').append(id);
                    System.out.println(line);
                } catch (SQLException e) {
                    System.out.println("prepared " + args[i] + " error " + e.getErrorCode() + " " + e.getSQLState());
                }
            }
        }
    }
}
