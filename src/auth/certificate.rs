//! The names a client certificate carries (#38), for `tls_client_cert_user`: its subject's
//! common names (RFC 5280 4.1.2.6, attribute 2.5.4.3) and its DNS subject alternative names
//! (4.2.1.6), as PostgreSQL's `clientname=CN` and MySQL's `REQUIRE SUBJECT` look at them.
//!
//! L0: pure. The certificate has been verified by the TLS layer before its names are read
//! here; a certificate this cannot parse names no one.

/// The `tls-server-end-point` channel binding data of the router's own certificate (RFC 5929
/// 4.1), which SCRAM-SHA-256-PLUS clients bind their proof to; `None` when its signature names
/// no hash. The same computation the router's backend logins bind with.
pub use crate::protocol::pg::binding::tls_server_end_point as end_point;

/// DER tag of a SET (the relative distinguished names of a Name).
const SET: u8 = 0x31;
/// DER tag of a SEQUENCE (an AttributeTypeAndValue).
const SEQUENCE: u8 = 0x30;
/// DER tag of an OBJECT IDENTIFIER.
const OID: u8 = 0x06;
/// The body of OID 2.5.4.3, `id-at-commonName`.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// Whether the DER certificate `der` names `user`: a common name of its subject or a DNS
/// subject alternative name equal to it (case-sensitively, as user names are compared).
pub fn names_user(der: &[u8], user: &str) -> bool {
    names(der).iter().any(|n| n == user)
}

/// The subject's common names, then the DNS subject alternative names, of DER certificate `der`.
pub fn names(der: &[u8]) -> Vec<String> {
    let cert = rustls::pki_types::CertificateDer::from(der);
    let Ok(cert) = webpki::EndEntityCert::try_from(&cert) else { return Vec::new() };
    let mut out = common_names(cert.subject());
    out.extend(cert.valid_dns_names().map(str::to_owned));
    out
}

/// Every common name of a Name's RDNSequence content (`subject` without its outer SEQUENCE).
fn common_names(mut subject: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((SET, mut set, rest)) = tlv(subject) {
        subject = rest;
        while let Some((SEQUENCE, attribute, more)) = tlv(set) {
            set = more;
            if let Some((OID, COMMON_NAME, value)) = tlv(attribute) {
                // Any of the DirectoryString kinds; only UTF-8-compatible text can be a user.
                if let Some((_, text, _)) = tlv(value) {
                    out.extend(std::str::from_utf8(text).ok().map(str::to_owned));
                }
            }
        }
    }
    out
}

/// One DER tag-length-value at the start of `input`: (tag, value, what follows). Lengths in the
/// short form and the long form of up to four bytes; anything else ends the walk.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        (bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), rest)
    };
    if rest.len() < len {
        return None;
    }
    let (value, rest) = rest.split_at(len);
    Some((tag, value, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Name's RDNSequence content: `O=qp` then `CN=app_cert` (as openssl writes a subject).
    fn subject() -> Vec<u8> {
        let attribute = |oid: &[u8], text: &[u8]| {
            let mut a = vec![OID, oid.len() as u8];
            a.extend_from_slice(oid);
            a.extend_from_slice(&[0x0c, text.len() as u8]);
            a.extend_from_slice(text);
            let mut seq = vec![SEQUENCE, a.len() as u8];
            seq.extend(a);
            let mut set = vec![SET, seq.len() as u8];
            set.extend(seq);
            set
        };
        let mut out = attribute(&[0x55, 0x04, 0x0a], b"qp");
        out.extend(attribute(COMMON_NAME, b"app_cert"));
        out
    }

    #[test]
    fn the_common_name_is_found_among_the_subjects_attributes() {
        assert_eq!(common_names(&subject()), ["app_cert"]);
    }

    /// A certificate's outer structure: an empty TBSCertificate, `algorithm`, an empty signature.
    #[test]
    fn a_truncated_subject_names_no_one_and_does_not_panic() {
        let whole = subject();
        for cut in 0..whole.len() {
            assert!(common_names(&whole[..cut]).iter().all(|n| n != "app_cert"), "cut at {cut}");
        }
        assert!(names(b"not a certificate").is_empty());
    }
}
