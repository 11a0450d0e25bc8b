//! SCRAM channel binding (#38): what the GS2 header says about it (RFC 5802 section 6 and 7:
//! `n`, `y` or `p=<type>`), the `c=` attribute it makes, and the `tls-server-end-point` data
//! (RFC 5929 section 4.1) PostgreSQL binds `SCRAM-SHA-256-PLUS` to: a hash of the server's
//! end-entity certificate, with the hash function of the certificate's signature algorithm,
//! SHA-256 in place of MD5 and SHA-1.
//!
//! Pure: the certificate's DER comes from whoever holds the TLS session.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sha2::{Digest as _, Sha224, Sha256, Sha384, Sha512};

/// The SASL mechanism name of SCRAM-SHA-256 with channel binding.
pub const SCRAM_SHA_256_PLUS: &str = "SCRAM-SHA-256-PLUS";

/// What a SCRAM client says about channel binding in its GS2 header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ChannelBinding {
    /// `n`: the client cannot bind (no TLS, or a certificate without a usable hash).
    #[default]
    Unsupported,
    /// `y`: the client could bind but the server did not offer `SCRAM-SHA-256-PLUS`; a server
    /// that does support binding refuses it, so a mechanism list stripped in transit is caught.
    NotOffered,
    /// `p=tls-server-end-point`: bound to this hash of the server certificate.
    TlsServerEndPoint(Vec<u8>),
}

impl ChannelBinding {
    /// The GS2 header that starts the client-first-message.
    pub fn gs2_header(&self) -> &'static str {
        match self {
            Self::Unsupported => "n,,",
            Self::NotOffered => "y,,",
            Self::TlsServerEndPoint(_) => "p=tls-server-end-point,,",
        }
    }

    /// The value of the client-final-message's `c=` attribute: base64 of the GS2 header and the
    /// binding data (`biws` without binding).
    pub fn c_attribute(&self) -> String {
        let data: &[u8] = match self {
            Self::TlsServerEndPoint(hash) => hash,
            _ => &[],
        };
        B64.encode([self.gs2_header().as_bytes(), data].concat())
    }
}

/// How `tls-server-end-point` hashes a certificate signed with a given algorithm.
#[derive(Clone, Copy)]
enum Hash {
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

/// Signature algorithm OIDs (DER content octets) and the hash each binds with.
const ALGORITHMS: &[(&[u8], Hash)] = &[
    // md5WithRSAEncryption, sha1WithRSAEncryption: SHA-256 instead (RFC 5929 section 4.1).
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x04], Hash::Sha256),
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x05], Hash::Sha256),
    // sha256/384/512/224WithRSAEncryption (RFC 4055).
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B], Hash::Sha256),
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0C], Hash::Sha384),
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0D], Hash::Sha512),
    (&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0E], Hash::Sha224),
    // ecdsa-with-SHA1 (SHA-256 instead), ecdsa-with-SHA224/256/384/512 (RFC 5758).
    (&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x01], Hash::Sha256),
    (&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x01], Hash::Sha224),
    (&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02], Hash::Sha256),
    (&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03], Hash::Sha384),
    (&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x04], Hash::Sha512),
];

const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;

/// The `tls-server-end-point` binding data of the certificate `der` (X.509, RFC 5280 section
/// 4.1: `SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }`). `None` when it is not
/// a certificate or its signature algorithm names no hash (Ed25519, RSA-PSS): PostgreSQL cannot
/// bind to such a certificate either.
pub fn tls_server_end_point(der: &[u8]) -> Option<Vec<u8>> {
    let (certificate, _) = element(der, SEQUENCE)?;
    let (_tbs, rest) = any_element(certificate)?;
    let (algorithm, _) = element(rest, SEQUENCE)?;
    let (oid, _) = element(algorithm, OID)?;
    let (_, hash) = ALGORITHMS.iter().find(|(known, _)| *known == oid)?;
    Some(match hash {
        Hash::Sha224 => Sha224::digest(der).to_vec(),
        Hash::Sha256 => Sha256::digest(der).to_vec(),
        Hash::Sha384 => Sha384::digest(der).to_vec(),
        Hash::Sha512 => Sha512::digest(der).to_vec(),
    })
}

/// The content of the DER element at the start of `input` if its tag is `tag`, and what follows.
fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, _) = input.split_first()?;
    if first != tag {
        return None;
    }
    any_element(input)
}

/// The content of the DER element at the start of `input`, whatever its (one-byte) tag, and
/// what follows it. Definite lengths only, as DER requires.
fn any_element(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7F);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, rest) = rest.split_at_checked(n)?;
        (bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), rest)
    };
    rest.split_at_checked(len)
}
