// MariaDB Connector/J through a pass-through pool (#23): logs in as USER and prints who the
// server says the session is, and the owner row of the user's own table. Run as:
//   java -cp mariadb-java-client.jar JdbcWhoAmI.java URL USER PASSWORD TABLE
import java.sql.*;

public class JdbcWhoAmI {
    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], table = args[3];
        try (Connection c = DriverManager.getConnection(url, user, password);
             Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT CURRENT_USER()")) {
                rs.next();
                System.out.println("current_user " + rs.getString(1));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT owner FROM " + table + " WHERE owner = ?")) {
                p.setString(1, user);
                try (ResultSet rs = p.executeQuery()) {
                    rs.next();
                    System.out.println("owner " + rs.getString(1));
                }
            }
        }
    }
}
