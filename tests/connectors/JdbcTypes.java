// MariaDB Connector/J reading typed results through the router (#35 type round trips): each SQL
// as a PreparedStatement (binary rows with useServerPrepStmts=true, text rows without). For each
// column of each row prints `NAME TYPENAME CLASS VALUE` from getObject (byte[] as hex), a
// statement without rows `ok`, a failed one `error CODE SQLSTATE`. Run as a single source file:
//   java -cp mariadb-java-client.jar JdbcTypes.java URL USER PASSWORD SQL...
import java.sql.*;

public class JdbcTypes {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[2])) {
            for (int i = 3; i < args.length; i++) {
                try (PreparedStatement p = c.prepareStatement(args[i])) {
                    if (!p.execute()) {
                        System.out.println("ok");
                        continue;
                    }
                    try (ResultSet rs = p.getResultSet()) {
                        ResultSetMetaData m = rs.getMetaData();
                        while (rs.next()) {
                            for (int col = 1; col <= m.getColumnCount(); col++) {
                                Object v = rs.getObject(col);
                                String shown = v instanceof byte[] ? hex((byte[]) v) : String.valueOf(v);
                                String cls = v == null ? "null" : v.getClass().getSimpleName();
                                System.out.println(m.getColumnLabel(col) + " " + m.getColumnTypeName(col) + " " + cls + " " + shown);
                            }
                        }
                    }
                } catch (SQLException e) {
                    System.out.println("error " + e.getErrorCode() + " " + e.getSQLState());
                }
            }
        }
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder("0x");
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
}
