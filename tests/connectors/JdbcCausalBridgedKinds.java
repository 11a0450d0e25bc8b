// Connector/J cells of the bridged causal matrix's write kinds (#34): a MySQL client on
// PostgreSQL pools, replay paused on the standby.
// java -cp mariadb-java-client.jar JdbcCausalBridgedKinds.java URL USER PASSWORD TABLE FIRST_ID
// URL decides client-side (default) or server-side prepare (useServerPrepStmts=true:
// COM_STMT_PREPARE/EXECUTE, each execute routed). Each kind is written through a
// PreparedStatement (a transaction by setAutoCommit(false) and commit(), as applications do);
// the writer reads its row back, a second connection SETs the writer's token, a third gets it
// as connection attribute. Prints `KIND OWN_COUNT OWN_SERVER SET_COUNT SET_SERVER ATTR_COUNT
// ATTR_SERVER`; a server is `standby` when `pg_stat_wal_receiver` has a row.
import java.sql.*;

public class JdbcCausalBridgedKinds {
    static String read(Connection c, String table, int n) throws SQLException {
        String sql = "SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM " + table + " WHERE id = ?";
        try (PreparedStatement p = c.prepareStatement(sql)) {
            p.setInt(1, n);
            try (ResultSet rs = p.executeQuery()) {
                rs.next();
                return rs.getLong(1) + " " + (rs.getLong(2) == 1 ? "standby" : "primary");
            }
        }
    }

    /// Runs `sql` with parameter `n` (when it has a `?`); the `id` it returns, else `n`.
    static int run(Connection c, String sql, int n) throws SQLException {
        try (PreparedStatement p = c.prepareStatement(sql)) {
            if (sql.contains("?")) {
                p.setInt(1, n);
            }
            if (p.execute()) {
                try (ResultSet rs = p.getResultSet()) {
                    if (rs.getMetaData().getColumnLabel(1).equals("id") && rs.next()) {
                        return rs.getInt(1);
                    }
                }
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], t = args[3];
        int n = Integer.parseInt(args[4]);
        // {kind, in a transaction, statements}
        String[][] kinds = {
            {"plain", "", "INSERT INTO " + t + " VALUES (?)"},
            {"cte", "", "WITH x AS (INSERT INTO " + t + " VALUES (?) RETURNING id) SELECT id FROM x"},
            {"volatile", "", "SELECT " + t + "_w(?)"},
            {"stable", "tx", "SELECT " + t + "_s(?)"},
            {"view", "tx", "SELECT id FROM " + t + "_v"},
            {"trigger", "", "INSERT INTO " + t + "_log VALUES (?)"},
            {"do", "", "DO 'BEGIN INSERT INTO " + t + " VALUES (%d); END'"},
            {"call", "", "CALL " + t + "_p(?)"},
            {"2pc", "2pc", "INSERT INTO " + t + " VALUES (?)"},
        };
        for (String[] k : kinds) {
            n++;
            try (Connection c = DriverManager.getConnection(url, user, password);
                 Connection o = DriverManager.getConnection(url, user, password)) {
                String sql = String.format(k[2], n);
                int id;
                if (k[1].equals("2pc")) {
                    try (Statement s = c.createStatement()) {
                        s.execute("BEGIN");
                        id = run(c, sql, n);
                        s.execute("PREPARE TRANSACTION '" + t + "_j" + n + "'");
                        s.execute("COMMIT PREPARED '" + t + "_j" + n + "'");
                    }
                } else if (k[1].equals("tx")) {
                    c.setAutoCommit(false);
                    id = run(c, sql, n);
                    c.commit();
                    c.setAutoCommit(true);
                } else {
                    id = run(c, sql, n);
                }
                String mine = read(c, t, id);
                String token;
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW querypilot.causal_token")) {
                    rs.next();
                    token = rs.getString(1);
                }
                try (Statement s = o.createStatement()) {
                    s.execute("SET querypilot.causal_token = '" + token + "'");
                }
                String attr;
                String attrUrl = url + "&connectionAttributes=querypilot.causal_token:" + token;
                try (Connection a = DriverManager.getConnection(attrUrl, user, password)) {
                    attr = read(a, t, id);
                }
                System.out.println(k[0] + " " + mine + " " + read(o, t, id) + " " + attr);
            } catch (SQLException e) {
                System.out.println(k[0] + " ERROR " + e.getErrorCode() + " " + e.getMessage());
            }
        }
    }
}
