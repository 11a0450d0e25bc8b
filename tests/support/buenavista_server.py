"""buenavista's own DuckDB PostgreSQL-wire server (buenavista.examples.duckdb_postgres) on
127.0.0.1:PORT over DBFILE, with its INFO log on stderr: buenavista logs "Input SQL: ..." for
every statement it runs, which is how the HTAP tests see placement from the engine's side."""
import logging
import sys

import duckdb
from buenavista.examples import duckdb_postgres

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
db = duckdb.connect(sys.argv[1])
server = duckdb_postgres.create(db, ("127.0.0.1", int(sys.argv[2])))
print("listening", flush=True)
try:
    server.serve_forever()
finally:
    db.close()
