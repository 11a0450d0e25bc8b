use super::*;
use crate::protocol::mysql::encode_text_row;
use crate::protocol::pg::backend::encode_data_row;
use crate::protocol::pg::decode_frame;

fn pg_frame(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_data_row(values, &mut out).expect("encode");
    out
}

fn pg_row(values: &[Option<&[u8]>]) -> Option<UdfRow> {
    let bytes = pg_frame(values);
    let frame = decode_frame(&bytes, MAX_MESSAGE).expect("frame").expect("whole");
    pg_udf_row(&frame)
}

fn my_row(values: &[Option<&[u8]>]) -> Option<UdfRow> {
    let mut payload = Vec::new();
    encode_text_row(values, &mut payload);
    mysql_udf_row(&payload, values.len())
}

#[test]
fn postgres_rows_become_catalog_entries() {
    let stable = pg_row(&[Some(b"public"), Some(b"price_of"), Some(b"s")]).expect("row");
    let volatile = pg_row(&[Some(b"app"), Some(b"bump"), Some(b"v")]).expect("row");
    assert_eq!(stable.volatility, Volatility::Stable);
    assert_eq!(pg_row(&[Some(b"public"), Some(b"f"), Some(b"x")]), None, "unknown code");
    assert_eq!(pg_row(&[Some(b"public"), None, Some(b"s")]), None, "NULL name");
    assert_eq!(pg_row(&[Some(b"public"), Some(b"f")]), None, "short row");
    let catalog = catalog_with(Protocol::Postgres, &[stable, volatile], &[]);
    assert_eq!(catalog.volatility("price_of"), Some(Volatility::Stable));
    assert_eq!(catalog.volatility("public.price_of"), Some(Volatility::Stable));
    assert_eq!(catalog.volatility("app.bump"), Some(Volatility::Volatile));
    assert_eq!(catalog.volatility("never_created"), None);
    assert_eq!(catalog.volatility("lower"), Some(Volatility::Immutable), "built-ins stay");
}

#[test]
fn a_non_data_row_message_is_no_entry() {
    let mut out = Vec::new();
    frontend::encode_query("SELECT 1", &mut out).expect("encode");
    let frame = decode_frame(&out, MAX_MESSAGE).expect("frame").expect("whole");
    assert_eq!(pg_udf_row(&frame), None);
}

#[test]
fn mysql_rows_become_catalog_entries() {
    let det = my_row(&[Some(b"shop"), Some(b"tax"), Some(b"YES"), Some(b"NO SQL")]);
    let writes = my_row(&[Some(b"shop"), Some(b"log_it"), Some(b"YES"), Some(b"MODIFIES SQL DATA")]);
    let (det, writes) = (det.expect("row"), writes.expect("row"));
    assert_eq!(det.volatility, Volatility::Stable);
    assert_eq!(writes.volatility, Volatility::Volatile);
    assert_eq!(my_row(&[Some(b"shop"), Some(b"x"), Some(b"MAYBE"), Some(b"NO SQL")]), None);
    assert_eq!(my_row(&[Some(b"shop"), Some(b"x"), None, Some(b"NO SQL")]), None);
    let trusted = ["shop.tax".to_owned(), "shop.log_it".to_owned()];
    let catalog = catalog_with(Protocol::MySql, &[det.clone(), writes.clone()], &trusted);
    assert_eq!(catalog.volatility("TAX"), Some(Volatility::Stable));
    assert_eq!(catalog.volatility("shop.log_it"), Some(Volatility::Volatile), "a listed declaration of writes");
    assert_eq!(catalog.volatility("now"), Some(Volatility::Stable));
    let unlisted = catalog_with(Protocol::MySql, &[det, writes], &[]);
    assert_eq!(unlisted.volatility("shop.tax"), Some(Volatility::Volatile), "declarations alone are not trusted");
    assert_eq!(unlisted.volatility("tax"), Some(Volatility::Volatile));
}

#[test]
fn a_listed_mysql_function_in_one_database_leaves_its_namesakes_volatile() {
    let row = |schema: &str| parse_mysql_udf_row(schema, "price", "YES", "READS SQL DATA").expect("row");
    let catalog = catalog_with(Protocol::MySql, &[row("shop"), row("other")], &["shop.price".to_owned()]);
    assert_eq!(catalog.volatility("shop.price"), Some(Volatility::Stable));
    assert_eq!(catalog.volatility("other.price"), Some(Volatility::Volatile));
    assert_eq!(catalog.volatility("price"), Some(Volatility::Volatile), "unqualified: either database's");
}
