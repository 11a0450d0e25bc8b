// Connector/J cells of the MariaDB causal matrix (#34) for an autocommit `SELECT f(n)` of a stored
// function that inserts (`TABLE_f`). Its result set ends in an EOF packet, which carries no session
// state: the commit's GTID is owed by the connection, and the router collects it as the connection
// goes back to the pool, so SHOW querypilot.causal_token answers that position and the writer's
// reads wait for it (on the primary while the replica is stopped). Run as a single source file:
// java -cp mariadb-java-client.jar JdbcCausalFunctionMy.java URL USER PASSWORD TABLE FIRST_ID
// URL (with allowMultiQueries=true) gets useServerPrepStmts=false and =true in turn. Runs in two
// stages. First, for each prepare mode and path (a Statement, a PreparedStatement with the id
// as parameter: COM_STMT_PREPARE/EXECUTE under useServerPrepStmts=true, a text query with the
// value written in otherwise, and `SELECT 1; SELECT f(n)` as one multi-statement Statement) it
// opens two writers, the second of which inserts a row at once (an earlier position); it prints
// `ready` and waits for a line on stdin: meanwhile the replica applies the earlier rows and its
// SQL thread is stopped. Then each writer shows its token (the older one, if any), writes row n
// through the function, reads it back, shows its token again and hands it to a second connection
// by SET (which read row n before, on the stopped replica) and to a third as its connection
// attribute (`connectionAttributes=querypilot.causal_token:TOKEN`). Prints
// `cell=PREPARE/PATH/earlier|first token0=T writer=R token=T before=R set=R attr=R`, each R
// `COUNT/@@server_id` or `error:CODE`.
import java.io.*;
import java.sql.*;
import java.util.*;

public class JdbcCausalFunctionMy {
    static String url, user, password, t;

    interface Read {
        String run() throws SQLException;
    }

    static String outcome(Read r) {
        try {
            return r.run();
        } catch (SQLException e) {
            return "error:" + e.getErrorCode();
        }
    }

    static String read(Connection c, int n) throws SQLException {
        try (Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT COUNT(*), @@server_id FROM " + t + " WHERE id = " + n)) {
            rs.next();
            return rs.getLong(1) + "/" + rs.getLong(2);
        }
    }

    static String show(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW querypilot.causal_token")) {
            rs.next();
            return rs.getString(1);
        }
    }

    static void text(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
            while (s.getMoreResults() || s.getUpdateCount() != -1) {
            }
        }
    }

    static void write(Connection c, String path, int n) throws SQLException {
        switch (path) {
            case "statement":
                text(c, "SELECT " + t + "_f(" + n + ")");
                break;
            case "prepared":
                try (PreparedStatement p = c.prepareStatement("SELECT " + t + "_f(?)")) {
                    p.setInt(1, n);
                    p.executeQuery().close();
                }
                break;
            default:
                text(c, "SELECT 1; SELECT " + t + "_f(" + n + ")");
        }
    }

    public static void main(String[] args) throws Exception {
        url = args[0];
        user = args[1];
        password = args[2];
        t = args[3];
        int n = Integer.parseInt(args[4]);
        List<Object[]> writers = new ArrayList<>();
        for (String prepare : new String[] {"false", "true"}) {
            String u = url + "&useServerPrepStmts=" + prepare;
            for (String path : new String[] {"statement", "prepared", "multi"}) {
                for (boolean earlier : new boolean[] {false, true}) {
                    Connection w = DriverManager.getConnection(u, user, password);
                    if (earlier) {
                        text(w, "INSERT INTO " + t + " VALUES (" + ++n + ")");
                    }
                    String cell = "server-prepare=" + prepare + "/" + path + "/" + (earlier ? "earlier" : "first");
                    writers.add(new Object[] {cell, path, u, w});
                }
            }
        }
        System.out.println("ready");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        for (Object[] cell : writers) {
            String path = (String) cell[1], u = (String) cell[2];
            int i = ++n;
            try (Connection w = (Connection) cell[3]; Connection o = DriverManager.getConnection(u, user, password)) {
                String token0 = show(w);
                write(w, path, i);
                String mine = read(w, i);
                String token = show(w);
                String before = read(o, i);
                String theirs = outcome(() -> {
                    text(o, "SET querypilot.causal_token = '" + token + "'");
                    return read(o, i);
                });
                String attr = outcome(() -> {
                    String withToken = u + "&connectionAttributes=querypilot.causal_token:" + token;
                    try (Connection a = DriverManager.getConnection(withToken, user, password)) {
                        return read(a, i);
                    }
                });
                System.out.println("cell=" + cell[0] + " token0=" + token0 + " writer=" + mine + " token=" + token
                    + " before=" + before + " set=" + theirs + " attr=" + attr);
            }
        }
    }
}
