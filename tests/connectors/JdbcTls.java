// A JDBC driver over TLS to the router (#38): PgJDBC or MariaDB Connector/J, whichever jar is on
// the class path, connects with URL (its TLS settings in the URL), runs one query and prints the
// TLS session of the driver's own socket: "tls PROTOCOL value 42". The socket is the driver's
// (PgJDBC: the query executor's PGStream's; Connector/J 2.7: the socket under the protocol's
// packet writer, whose `socket` field keeps the plain one after the upgrade), read through
// reflection since neither driver exports it (Connector/J needs `--add-opens` of java.io and
// sun.security.ssl for that). A connection that fails prints "refused " and the
// innermost cause's class and message (e.g. a certificate that does not verify). Run as:
//   java -cp DRIVER.jar JdbcTls.java URL USER PASSWORD
import java.io.FilterOutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.Socket;
import java.sql.*;
import javax.net.ssl.SSLSocket;

public class JdbcTls {
    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2];
        Connection c;
        try {
            c = DriverManager.getConnection(url, user, password);
        } catch (SQLException e) {
            Throwable root = e;
            while (root.getCause() != null) root = root.getCause();
            System.out.println("refused " + root.getClass().getName() + ": " + root.getMessage());
            return;
        }
        try (c; Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT 40 + 2")) {
            rs.next();
            Socket socket = socketOf(c);
            String tls = socket instanceof SSLSocket
                ? ((SSLSocket) socket).getSession().getProtocol()
                : "none(" + socket.getClass().getName() + ")";
            System.out.println("tls " + tls + " value " + rs.getInt(1));
        }
    }

    /** The socket the driver reads and writes the connection's messages through. */
    static Socket socketOf(Connection c) throws Exception {
        if (url(c).startsWith("jdbc:postgresql:")) {
            Object executor = call(c, "getQueryExecutor");
            Object stream = field(executor, "pgStream");
            return (Socket) call(stream, "getSocket");
        }
        Object out = field(call(c, "getProtocol"), "writer");
        while (out instanceof FilterOutputStream) out = field(out, "out");
        // A TLS socket's stream is an inner object of the socket; a plain one's is not.
        try {
            return (Socket) field(out, "this$0");
        } catch (NoSuchFieldException e) {
            return new Socket();
        }
    }

    static String url(Connection c) throws SQLException {
        return c.getMetaData().getURL();
    }

    /** Calls the no-argument method `name` of `o`, declared on its class or a superclass. */
    static Object call(Object o, String name) throws Exception {
        for (Class<?> k = o.getClass(); k != null; k = k.getSuperclass()) {
            try {
                Method m = k.getDeclaredMethod(name);
                m.setAccessible(true);
                return m.invoke(o);
            } catch (NoSuchMethodException e) {
                // declared further up
            }
        }
        throw new NoSuchMethodException(o.getClass() + "." + name);
    }

    /** Field `name` of `o`, declared on its class or a superclass. */
    static Object field(Object o, String name) throws Exception {
        for (Class<?> k = o.getClass(); k != null; k = k.getSuperclass()) {
            try {
                Field f = k.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // declared further up
            }
        }
        throw new NoSuchFieldException(o.getClass() + "." + name);
    }
}
