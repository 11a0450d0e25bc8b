// PgJDBC's paths through the causal-read matrix (#34; see causal_matrix.py): the simple
// protocol (preferQueryMode=simple), unnamed and named (prepareThreshold=-1) extended
// statements, and a multi-statement text (which PgJDBC sends as one batch of statements), x
// token by SET, SHOW then SET, startup parameter (options=-c ...) x nine write kinds. Run as a
// single source file: java -cp postgresql.jar JdbcCausalMatrix.java PORT DB USER PASSWORD TABLE FIRST_ID
import java.io.StringReader;
import java.sql.*;
import org.postgresql.PGConnection;

public class JdbcCausalMatrix {
    static String port, db, user, password, t;
    static int next;

    static Connection connect(String path, String token) throws SQLException {
        String url = "jdbc:postgresql://127.0.0.1:" + port + "/" + db + "?sslmode=disable";
        if (path.equals("simple")) url += "&preferQueryMode=simple";
        if (path.equals("named")) url += "&prepareThreshold=-1";
        if (token != null) url += "&options=-c%20querypilot.causal_token=" + token;
        return DriverManager.getConnection(url, user, password);
    }

    static String[] writes(String kind, int i) {
        switch (kind) {
            case "plain": return new String[] {"INSERT INTO " + t + " VALUES (" + i + ")"};
            case "cte": return new String[] {"WITH x AS (INSERT INTO " + t + " VALUES (" + i + ") RETURNING id) SELECT id FROM x"};
            case "volatile": return new String[] {"SELECT " + t + "_w(" + i + ")"};
            case "stable": return new String[] {"BEGIN", "SELECT " + t + "_s(" + i + ")", "COMMIT"};
            case "trigger": return new String[] {"INSERT INTO " + t + "_log VALUES (" + i + ")"};
            case "do": return new String[] {"DO $$ BEGIN INSERT INTO " + t + " VALUES (" + i + "); END $$"};
            case "call": return new String[] {"CALL " + t + "_p(" + i + ")"};
            default: return new String[] {"BEGIN", "INSERT INTO " + t + " VALUES (" + i + ")",
                "PREPARE TRANSACTION '" + t + "_" + i + "'", "COMMIT PREPARED '" + t + "_" + i + "'"};
        }
    }

    /** Runs one statement by the connection's path; returns its first row's first two columns. */
    static String[] run(Connection c, String path, String sql) throws SQLException {
        boolean rows;
        Statement s;
        if (path.equals("simple") || path.equals("multi")) {
            s = c.createStatement();
            rows = s.execute(path.equals("multi") ? "SELECT 1; " + sql : sql);
            if (path.equals("multi")) rows = s.getMoreResults(); // the statement's own result
        } else {
            PreparedStatement p = c.prepareStatement(sql);
            rows = p.execute();
            s = p;
        }
        String[] out = null;
        if (rows) {
            try (ResultSet rs = s.getResultSet()) {
                if (rs.next()) out = new String[] {rs.getString(1), rs.getMetaData().getColumnCount() > 1 ? rs.getString(2) : null};
            }
        }
        s.close();
        return out;
    }

    static void write(Connection c, String path, String kind, int i) throws Exception {
        if (kind.equals("copy")) {
            ((PGConnection) c).getCopyAPI().copyIn("COPY " + t + " (id) FROM STDIN", new StringReader(i + "\n"));
            return;
        }
        for (String sql : writes(kind, i)) {
            // COMMIT PREPARED cannot run inside the multi-statement text's implicit block.
            run(c, path.equals("multi") && sql.startsWith("COMMIT PREPARED") ? "unnamed" : path, sql);
        }
    }

    static String verdict(String label, String[] row) {
        boolean fresh = row != null && row[0].equals("1");
        return label + (fresh ? " ok " : " STALE ") + (row == null ? "?" : row[1]);
    }

    public static void main(String[] args) throws Exception {
        port = args[0]; db = args[1]; user = args[2]; password = args[3]; t = args[4];
        next = Integer.parseInt(args[5]);
        String read = "SELECT count(*), pg_is_in_recovery() FROM " + t + " WHERE id = ";
        String[] kinds = {"plain", "cte", "volatile", "stable", "trigger", "do", "call", "copy", "2pc"};
        for (String path : new String[] {"simple", "unnamed", "named", "multi"}) {
            for (String token : new String[] {"set", "show_set", "startup"}) {
                for (String kind : kinds) {
                    String label = "jdbc " + path + " " + token + " " + kind;
                    int i = ++next;
                    try {
                        String tok;
                        String[] own;
                        try (Connection w = connect(path, null)) {
                            write(w, path, kind, i);
                            own = run(w, path, read + i);
                            String show = token.equals("show_set") && !path.equals("multi") ? path : "unnamed";
                            tok = run(w, show, "SHOW querypilot.causal_token")[0];
                        }
                        String[] got;
                        try (Connection r = connect(path, token.equals("startup") ? tok : null)) {
                            if (!token.equals("startup")) run(r, path.equals("multi") ? "simple" : path, "SET querypilot.causal_token = '" + tok + "'");
                            got = run(r, path, read + i);
                        }
                        System.out.println(verdict(label + " own", own));
                        System.out.println(verdict(label, got));
                    } catch (Exception e) {
                        System.out.println(label + " ERROR " + e.getMessage().split("\n")[0]);
                    }
                }
            }
        }
    }
}
