"""PyMySQL (whose default flags leave CLIENT_MULTI_STATEMENTS off) creating stored programs whose
bodies hold semicolons -- each is one statement the server runs without multi-statements (#18) --
and calling a procedure that returns several result sets (CLIENT_MULTI_RESULTS).

Usage: pymysql_procedures.py HOST PORT USER PASSWORD DATABASE PREFIX. Prints one line per check;
exits non-zero on any error.
"""
import sys

import pymysql

host, port, user, password, database, prefix = sys.argv[1:7]
conn = pymysql.connect(host=host, port=int(port), user=user, password=password, database=database,
                       autocommit=True)
cur = conn.cursor()
table, proc, func, trig = (f"{prefix}_t", f"{prefix}_p", f"{prefix}_f", f"{prefix}_tr")
cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT, note VARCHAR(20))")
cur.execute(f"""CREATE PROCEDURE {proc}(IN n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    SET i = i + 1;
    INSERT INTO {table} (id, v) VALUES (i, i * 10);
  END WHILE;
  SELECT COUNT(*) AS rows_made FROM {table};
  SELECT id, v FROM {table} ORDER BY id;
END""")
print("procedure created")
cur.execute(f"""CREATE FUNCTION {func}(x INT) RETURNS INT DETERMINISTIC
BEGIN
  DECLARE y INT;
  SET y = x * 2;
  RETURN CASE WHEN y > 10 THEN y ELSE 0 END;
END""")
print("function created")
cur.execute(f"""CREATE TRIGGER {trig} BEFORE UPDATE ON {table} FOR EACH ROW
BEGIN
  IF NEW.v <> OLD.v THEN
    SET NEW.note = 'changed';
  END IF;
END""")
print("trigger created")
cur.execute(f"CALL {proc}(3)")
print("call set 1", cur.fetchall())
print("more", cur.nextset())
print("call set 2", cur.fetchall())
while cur.nextset():
    pass
cur.execute(f"SELECT {func}(3), {func}(7)")
print("function", cur.fetchone())
cur.execute(f"UPDATE {table} SET v = v + 1 WHERE id = 2")
cur.execute(f"SELECT note FROM {table} WHERE id = 2")
print("trigger", cur.fetchone())
try:
    cur.execute("SELECT 1; SELECT 2")
    print("multi accepted")
except pymysql.MySQLError as e:
    print("multi refused", e.args[0])
for kind, name in (("TRIGGER", trig), ("FUNCTION", func), ("PROCEDURE", proc), ("TABLE", table)):
    cur.execute(f"DROP {kind} {name}")
print("dropped")
conn.close()
