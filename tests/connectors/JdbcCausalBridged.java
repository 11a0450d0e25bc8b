// Connector/J cells of the bridged causal matrix (#34): a MySQL client on PostgreSQL pools.
// java -cp mariadb-java-client.jar JdbcCausalBridged.java URL USER PASSWORD TABLE FIRST_ID
// URL decides client-side (default) or server-side prepare (useServerPrepStmts=true). Replay
// is paused on the standby. A PreparedStatement writes row n (a plain INSERT, then one in a
// transaction); the writer reads it back, hands its token (SHOW querypilot.causal_token) to a
// second connection, which reads it too, and to a third as its connection attribute
// (`connectionAttributes=querypilot.causal_token:TOKEN`). Prints `KIND WRITER_COUNT
// WRITER_SERVER TOKEN_KIND OTHER_COUNT OTHER_SERVER ATTR_COUNT ATTR_SERVER`; a server is
// `standby` when `pg_stat_wal_receiver` has a row.
import java.sql.*;

public class JdbcCausalBridged {
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

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2], t = args[3];
        int n = Integer.parseInt(args[4]);
        for (String kind : new String[] {"plain", "transaction"}) {
            n++;
            try (Connection c = DriverManager.getConnection(url, user, password);
                 Connection o = DriverManager.getConnection(url, user, password)) {
                c.setAutoCommit(!kind.equals("transaction"));
                try (PreparedStatement p = c.prepareStatement("INSERT INTO " + t + " VALUES (?)")) {
                    p.setInt(1, n);
                    p.execute();
                }
                if (kind.equals("transaction")) {
                    c.commit();
                    c.setAutoCommit(true);
                }
                String mine = read(c, t, n);
                String token;
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW querypilot.causal_token")) {
                    rs.next();
                    token = rs.getString(1);
                }
                try (Statement s = o.createStatement()) {
                    s.execute("SET querypilot.causal_token = '" + token + "'");
                }
                String tokenKind = token.isEmpty() ? "-" : token.split(":")[0];
                String attrUrl = url + "&connectionAttributes=querypilot.causal_token:" + token;
                String attr;
                try (Connection a = DriverManager.getConnection(attrUrl, user, password)) {
                    attr = read(a, t, n);
                }
                System.out.println(kind + " " + mine + " " + tokenKind + " " + read(o, t, n) + " " + attr);
            }
        }
    }
}
