#!/usr/bin/env python3
"""Writes the small committed seed corpus under fuzz/seeds/<target>/ (run from fuzz/).

Seeds are well-formed messages built by hand from the protocol docs, so the fuzzer starts from
inputs that pass the decoders' first checks. Re-running overwrites the same files.
"""
import base64
import os
import struct

def put(target, name, data):
    d = os.path.join("seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def pg_msg(tag, body):
    return tag + struct.pack(">i", len(body) + 4) + body

def cstr(s):
    return s.encode() + b"\0"

# --- pg_startup
startup = struct.pack(">i", 196608) + cstr("user") + cstr("app") + cstr("database") + cstr("main") + cstr("application_name") + cstr("psql") + b"\0"
put("pg_startup", "startup", struct.pack(">i", len(startup) + 4) + startup)
put("pg_startup", "ssl", struct.pack(">ii", 8, 80877103))
put("pg_startup", "gssenc", struct.pack(">ii", 8, 80877104))
put("pg_startup", "cancel", struct.pack(">iiii", 16, 80877102, 4242, -7))

# --- pg_frontend
put("pg_frontend", "query", pg_msg(b"Q", cstr("SELECT 1")))
ext = (pg_msg(b"P", cstr("s1") + cstr("SELECT $1::int") + struct.pack(">hi", 1, 23))
       + pg_msg(b"B", cstr("") + cstr("s1") + struct.pack(">hh", 1, 0) + struct.pack(">hi", 1, 1) + b"7" + struct.pack(">hh", 1, 1))
       + pg_msg(b"D", b"P" + cstr(""))
       + pg_msg(b"E", cstr("") + struct.pack(">i", 0))
       + pg_msg(b"C", b"S" + cstr("s1"))
       + pg_msg(b"H", b"") + pg_msg(b"S", b""))
put("pg_frontend", "extended", ext)
put("pg_frontend", "copy", pg_msg(b"d", b"1\tx\n") + pg_msg(b"c", b"") + pg_msg(b"f", cstr("nope")) + pg_msg(b"X", b""))
put("pg_frontend", "sasl_initial", pg_msg(b"p", cstr("SCRAM-SHA-256") + struct.pack(">i", 32) + b"n,,n=,r=rOprNGfwEbeRWgbNEkqO%hvY"))

# --- pg_backend
be = (pg_msg(b"R", struct.pack(">i", 0))
      + pg_msg(b"S", cstr("server_version") + cstr("16.2"))
      + pg_msg(b"K", struct.pack(">ii", 1, 2))
      + pg_msg(b"Z", b"I"))
put("pg_backend", "greeting", be)
put("pg_backend", "sasl", pg_msg(b"R", struct.pack(">i", 10) + cstr("SCRAM-SHA-256") + b"\0") + pg_msg(b"R", struct.pack(">i", 5) + b"salt"))
rows = (pg_msg(b"T", struct.pack(">h", 1) + cstr("x") + struct.pack(">ihihih", 0, 0, 23, 4, -1, 0))
        + pg_msg(b"D", struct.pack(">h", 2) + struct.pack(">i", 1) + b"1" + struct.pack(">i", -1))
        + pg_msg(b"C", cstr("SELECT 1")) + pg_msg(b"Z", b"T"))
put("pg_backend", "rows", rows)
err = pg_msg(b"E", b"SERROR\0C42P01\0Mrelation \"t\" does not exist\0P15\0\0") + pg_msg(b"N", b"SNOTICE\0C00000\0Mhi\0\0")
put("pg_backend", "error", err)
put("pg_backend", "misc", pg_msg(b"t", struct.pack(">hI", 1, 23)) + pg_msg(b"G", b"\0" + struct.pack(">hh", 1, 0))
    + pg_msg(b"A", struct.pack(">i", 9) + cstr("chan") + cstr("payload")) + pg_msg(b"v", struct.pack(">ii", 0, 1) + cstr("_pq_.x"))
    + pg_msg(b"V", struct.pack(">i", 2) + b"ok"))

# --- pg_login: mode byte (odd = SCRAM, even = MD5), then messages as tag, u16 length, body
def login_msg(tag, body):
    return tag + struct.pack(">H", len(body)) + body

put("pg_login", "scram", b"\x01"
    + login_msg(b"p", cstr("SCRAM-SHA-256") + struct.pack(">i", 32) + b"n,,n=,r=rOprNGfwEbeRWgbNEkqO%hvY")
    + login_msg(b"p", b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvY3rfu9VZQ8SJ3kqZd,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
put("pg_login", "md5", b"\x00" + login_msg(b"p", cstr("md5bb41a296aab6baccb36ff243a562abff")))
put("pg_login", "second_startup", b"\x01" + login_msg(b"\x00", struct.pack(">i", 196608) + cstr("user") + cstr("postgres") + b"\0"))

# --- pg_scram
put("pg_scram", "exchange", "n,,n=app,r=rOprNGfwEbeRWgbNEkqO\nc=biws,r=rOprNGfwEbeRWgbNEkqO3rfu9VZQ8SJ3kqZd,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
put("pg_scram", "secret", "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:HKZbQBO1LoVZrq/MgHDkoHJjUs5Ro5EKiTpr/Qq4ws4=")

# --- pg_channel_binding: X.509 certificates (ecdsa-with-SHA256, sha384WithRSAEncryption) as DER,
# the ones crates/querypilot-protocol/src/pg/tests/binding.rs checks.
put("pg_channel_binding", "ecdsa_sha256", base64.b64decode(
    "MIIBbjCCAROgAwIBAgIUXbE9PiqPrk7IQtJuH0cO1XZdIPgwCgYIKoZIzj0EAwIwDDEKMAgGA1UEAwwBYTAeFw0yNjEyMDYwMTI2NTRaFw0yNjEyMDcwMTI2NTRaMAwxCjAIBgNVBAMMAWEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQy8Q4MvDi1ck4004iENktiFIi6HbZ7qqFsfMtlnJIyy4BS5BJ42xhwdB0qBBc68XyR3XSvfKSrMLFzEVusTxsvo1MwUTAdBgNVHQ4EFgQU/4TEKmza0r9sVDBEFHiCXA2LlM0wHwYDVR0jBBgwFoAU/4TEKmza0r9sVDBEFHiCXA2LlM0wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAyEGOwc9QeQtG5BXeJ0EpMOhW55Up+z2vmB7kYyR4e9QCIQD6xqsotmgUZrnh+89BSvK0DZB71+e0MV1rNiLMjWOssw=="))
put("pg_channel_binding", "rsa_sha384", base64.b64decode(
    "MIIB9DCCAV2gAwIBAgIUC1l6AixHIf3dNYr83HVs62P40k8wDQYJKoZIhvcNAQEMBQAwDDEKMAgGA1UEAwwBYjAeFw0yNjEyMDYwMTI2NTRaFw0yNjEyMDcwMTI2NTRaMAwxCjAIBgNVBAMMAWIwgZ8wDQYJKoZIhvcNAQEBBQADgY0AMIGJAoGBANve5c76e/3vLtB6lIu2eQM+XrOFDURXTYSFpqmb2o+cuzhOE/Qw4FMMFTCkN20dmGVgA/Crs+sMr7C8qzJcwYW8/uHzq4D/2l95XYR69SUVEO4m7kQUtSQjbOD0r9yYm1zmKd3enwcLqVCh88T7UmeTOzF8/mXZGuRGb1dj6GlBAgMBAAGjUzBRMB0GA1UdDgQWBBRXm89w/6Qn/Kt6mKlTPMQJOkwAJjAfBgNVHSMEGDAWgBRXm89w/6Qn/Kt6mKlTPMQJOkwAJjAPBgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBDAUAA4GBAFhOwNyRgevSx6vJM5iwXw9/uLaGL0li8My/Js9W0Kavp4JOT5oX2g59xPxA5jeWbjzrUsCWl/iCx6j8+UC9wUW1OdFtmaOOZ+Rttm8CD9vfwmUtrEclugcAI8ULHriRWVB8bobupYgZmUBVV/wAVm4gkl7nF3j9AjPwVV5Ug9He"))

# --- MySQL
def lenenc(b):
    assert len(b) < 251
    return bytes([len(b)]) + b

def my_packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload

put("mysql_framer", "two_packets", b"\x00" + my_packet(0, b"\x03SELECT 1") + my_packet(1, b"\x00\x00\x00\x02\x00\x00\x00"))
put("mysql_framer", "small_limit", b"\x85" + my_packet(0, b"\x0e"))

greeting = (b"\x0a" + b"8.0.36\0" + struct.pack("<I", 11) + b"abcdefgh" + b"\0" + struct.pack("<H", 0xFFFF) + b"\xff"
            + struct.pack("<H", 2) + struct.pack("<H", 0xDFFF) + bytes([21]) + b"\0" * 10 + b"ijklmnopqrst\0" + b"caching_sha2_password\0")
put("mysql_handshake", "greeting", b"\x00" + greeting)
caps = 0x0200 | 0x8000 | 0x0008 | 0x80000 | 0x100000 | 0x200000
resp = (struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 + cstr("app") + lenenc(b"x" * 20) + cstr("main")
        + cstr("mysql_native_password") + lenenc(lenenc(b"_os") + lenenc(b"linux")))
put("mysql_handshake", "response", b"\x00" + resp)
put("mysql_handshake", "ssl_request", b"\x00" + struct.pack("<IIB", caps | 0x0800, 1 << 24, 45) + b"\0" * 23)
put("mysql_handshake", "auth_switch", b"\x00" + b"\xfemysql_native_password\0" + b"01234567890123456789\0")
put("mysql_handshake", "auth_ok", b"\x01" + b"\x00\x00\x00\x02\x00\x00\x00")

put("mysql_command", "query", b"\x00" + b"\x03SELECT 1")
put("mysql_command", "change_user", b"\x07" + b"\x11" + cstr("app") + lenenc(b"y" * 20) + cstr("db") + struct.pack("<H", 45) + cstr("mysql_native_password") + lenenc(lenenc(b"k") + lenenc(b"v")))
execute = b"\x17" + struct.pack("<IBI", 1, 0, 1) + b"\x00" + b"\x01" + b"\x08\x00" + b"\xfe\x00" + struct.pack("<q", 42) + lenenc(b"abc")
put("mysql_command", "stmt_execute", b"\x20" + execute)
put("mysql_command", "stmt_misc", b"\x00" + b"\x19" + struct.pack("<I", 7))

put("mysql_response", "ok_tracked", b"\x0f" + b"\x00\x01\x00" + struct.pack("<HH", 0x4002, 0) + lenenc(b"") + lenenc(b"\x01" + lenenc(lenenc(b"shop"))))
put("mysql_response", "err", b"\x01" + b"\xff" + struct.pack("<H", 1146) + b"#42S02" + b"Table 'x' doesn't exist")
put("mysql_response", "eof", b"\x01" + b"\xfe\x00\x00\x02\x00")
put("mysql_response", "column", b"\x00" + lenenc(b"def") + lenenc(b"shop") + lenenc(b"o") + lenenc(b"orders") + lenenc(b"id") + lenenc(b"id") + b"\x0c" + struct.pack("<HIBHB", 63, 20, 8, 0x23, 0) + b"\0\0")
put("mysql_response", "prepare_ok", b"\x00" + b"\x00" + struct.pack("<IHHBH", 1, 2, 1, 0, 0))

put("mysql_rows", "text", bytes([2, 0xfd, 0x08, 0]) + lenenc(b"hello") + b"\xfb")
put("mysql_rows", "binary", bytes([3, 0x08, 0x0c, 0xfd, 0x01]) + b"\x00" + b"\x00" + struct.pack("<Q", 7) + bytes([7]) + struct.pack("<HBBBBB", 2024, 5, 17, 12, 30, 0) + lenenc(b"x"))

# --- SQL
for name, sql in [
    ("select", "SELECT a, b FROM t WHERE id IN (1, 2, 3) AND name = 'x' -- c\n"),
    ("hint", "/* querypilot: route=replica */ SELECT now()"),
    ("pg_strings", "SELECT E'a\\'b', $tag$x$tag$, B'101', X'ff', U&'d\\0061t', $1, \"Q\"\"id\" /* a /* nested */ */;"),
    ("mysql", "SELECT `c`, @v := 1, 0x1F, b'01' FROM t # hash\n/*!50000 STRAIGHT_JOIN */ LIMIT 1 FOR UPDATE"),
    ("multi", "BEGIN; UPDATE t SET x = x + 1 WHERE id = ?; SELECT nextval('s'); COMMIT"),
    ("set", "SET LOCAL statement_timeout = 5; SET @x := 3; WITH c AS (SELECT 1) SELECT * FROM c"),
]:
    put("sql_lexer", name, sql)
    put("sql_analyze", name, sql)
put("sql_analyze", "nested", "SELECT " + "(" * 30 + "1" + ")" * 30)

# --- sql_template: selector byte (bit 0: source MySQL, bit 1: target MySQL), then original, translated
# and incoming statements separated by NUL.
for name, selector, parts in [
    ("pg_to_pg", 0, ["SELECT * FROM t WHERE a = 1 AND b = 'x'", "SELECT * FROM v WHERE b = 'x' AND a = 1", "select * from t where a = -42 and b = 'it''s'"]),
    ("in_list", 0, ["SELECT * FROM t WHERE id IN (1, 2)", "SELECT * FROM v WHERE id IN (1, 2) LIMIT 5", "SELECT * FROM t WHERE id IN (7, 8, 9, 10)"]),
    ("my_to_pg", 1, ["SELECT JSON_OVERLAPS(tags, '[1,2]') FROM t WHERE id = 3", "SELECT tags ?| '{1,2}' FROM t WHERE id = 3", "SELECT JSON_OVERLAPS(tags, 'a\\\\b\\'c') FROM t WHERE id = ?"]),
    ("pg_to_my", 2, ["SELECT $1::int, 'é', TRUE, NULL", "SELECT `x`, 'é', TRUE, NULL", "SELECT $1::int, 'é', FALSE, NULL"]),
    ("params", 3, ["SELECT * FROM t WHERE a = 1 AND b = 2", "SELECT * FROM v WHERE a = 1 AND b = 2", "SELECT * FROM t WHERE a = ? AND b = ?"]),
]:
    put("sql_template", name, bytes([selector]) + "\0".join(parts).encode())

# --- pg_exchange (#37): op bytes (see the target's header). 0-2 queue an expectation (arg), 3 heal
# mark (arg), 4 router answer, 5 refuse, 6 Sync (arg even: attached), 7 Flush, 8 timeout, 9-15 a
# backend frame whose kind (0-23) is ((op >> 4) + (op & 15) * 16) % 24.
def pg_frame_op(kind):
    return next(op for op in range(256) if op % 16 >= 9 and ((op >> 4) + (op & 15) * 16) % 24 == kind)

PARSE, BIND, DESC_STMT, DESC_PORTAL, EXECUTE, SYNTH = 0x00, 0x01, 0x02, 0x03, 0x04, 0x06
def queue(e): return bytes([0, e])
def frames(*kinds): return b"".join(bytes([pg_frame_op(k)]) + (b"\0" if k in (6, 14, 15, 18) else b"") for k in kinds)
SYNC = bytes([6, 0])
put("pg_exchange", "extended", queue(PARSE) + queue(BIND) + queue(DESC_PORTAL) + queue(EXECUTE) + SYNC + frames(0, 1, 4, 6, 9, 18))
put("pg_exchange", "heal", bytes([3, 0]) + queue(DESC_STMT) + SYNC + frames(3, 12, 18, 3, 4, 18))
put("pg_exchange", "answer", queue(SYNTH) + bytes([4]) + queue(BIND) + queue(EXECUTE) + SYNC + frames(1, 9, 19, 18))
put("pg_exchange", "flush_error", queue(PARSE) + queue(BIND) + bytes([7]) + frames(0, 17) + SYNC + frames(18))

# --- mysql_exchange (#37): mode byte (grammar = mode % 5; 0x08 DEPRECATE_EOF; 0x10 unchecked ids),
# first sequence id, then ops: 0-1 client file bytes (u8 length), 2 abandon, 3 long-packet header
# (seq, first byte, size), 4-7 a backend packet (seq, u8 length, payload).
def my_op(seq, payload): return bytes([4, seq, len(payload)]) + payload
put("mysql_exchange", "result_set", bytes([0, 1]) + my_op(1, b"\x01") + my_op(2, b"\x03def\x00\x00\x00\x01a\x00\x0c") +
    my_op(3, b"\xfe\x00\x00\x02\x00") + my_op(4, b"\x01x") + my_op(5, b"\xfe\x00\x00\x02\x00"))
put("mysql_exchange", "local_infile", bytes([1, 1]) + my_op(1, b"\xfbf") + bytes([0, 9]) + b"\x01\x00\x00\x02a\x00\x00\x00\x03" +
    my_op(4, b"\x00\x01\x00\x02\x00\x00\x00"))
put("mysql_exchange", "long_row", bytes([0x08 | 2, 1]) + my_op(1, b"\x01") + my_op(2, b"\x03def") + bytes([3, 3, 1, 0]) + bytes([3, 4, 1, 1]) +
    my_op(5, b"\xfe\x00\x00\x02\x00\x00\x00"))

# --- handover_wire (#40): length-prefixed frames, a tag byte then the fields, big-endian
def ho(body):
    return struct.pack(">I", len(body)) + body
hello = ho(b"\x01" + b"QPHANDOV" + struct.pack(">II", 2, 4242))
accept = ho(b"\x02" + struct.pack(">I", 17))
refuse = ho(b"\x03" + struct.pack(">I", 5) + b"nope!")
listeners = ho(b"\x04" + struct.pack(">HII", 2, 5, 70) + struct.pack(">HHHHH", 2, 0, 0, 1, 0) + b"\x01")
# Format 2: a flag after the key says the session's server connection rides along.
session = ho(b"\x05" + b"\x00" + struct.pack(">Iii", 0, 0x01000007, 42) + b"\x01" + struct.pack(">I", 3) + b"abc")
done = ho(b"\x06")
put("handover_wire", "exchange", hello + accept + listeners + session + done)
put("handover_wire", "refused", hello + refuse)
