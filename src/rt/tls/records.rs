//! A TLS session continued in another process of the router (#40). rustls cannot import a
//! session, only give up its keys (`dangerous_extract_secrets`, made for kernel TLS); the kernel
//! here has no TLS offload, so the process taking a session over protects its records itself,
//! with the keys and sequence numbers the former process extracted. Only established sessions
//! move, so what is left of TLS is the record layer (RFC 8446 §5 for TLS 1.3, RFC 5246 §6.2.3.3
//! and RFC 7905 for TLS 1.2's AEAD suites); a peer that asks for more than records (a TLS 1.3
//! key update, a TLS 1.2 renegotiation) is refused with an error, as the session cannot follow
//! it without the traffic secrets, which rustls does not give up.
//!
//! Sans-IO: ciphertext in, plaintext out and the other way.

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

/// The most plaintext one record carries.
const PLAIN_MAX: usize = 1 << 14;
/// The most ciphertext one record may carry (TLS 1.3's bound; TLS 1.2's is larger, but no
/// AEAD suite expands a record by more than this).
const CIPHER_MAX: usize = PLAIN_MAX + 256;
const HEADER: usize = 5;
const TAG: usize = 16;
/// TLS 1.2 AES-GCM's explicit nonce, sent before each record's ciphertext.
const EXPLICIT: usize = 8;

const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
const CLOSE_NOTIFY: u8 = 0;
const NEW_SESSION_TICKET: u8 = 4;

/// The protocol version the session negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Version {
    Tls12,
    Tls13,
}

/// The AEAD the session's suite protects records with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    fn algorithm(self) -> &'static aead::Algorithm {
        match self {
            Cipher::Aes128Gcm => &aead::AES_128_GCM,
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }

    /// TLS 1.2 AES-GCM carries part of each record's nonce in the record.
    fn explicit_nonce(self, version: Version) -> usize {
        match (version, self) {
            (Version::Tls12, Cipher::Aes128Gcm | Cipher::Aes256Gcm) => EXPLICIT,
            _ => 0,
        }
    }
}

/// One direction's protection as it travels between processes.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenKeys {
    pub key: Vec<u8>,
    /// The suite's IV: TLS 1.3's and ChaCha20's whole per-record nonce base; TLS 1.2 AES-GCM's
    /// 4-byte salt followed by the base of its explicit nonces.
    pub iv: [u8; 12],
    /// The sequence number of the next record.
    pub seq: u64,
}

/// A TLS session's record protection as it travels between processes.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenTls {
    pub version: Version,
    pub cipher: Cipher,
    /// What this end sends with.
    pub tx: FrozenKeys,
    /// What this end receives with.
    pub rx: FrozenKeys,
    /// This end is the TLS client (a server connection the router opened).
    pub client: bool,
    /// Ciphertext received and not yet opened: the start of the peer's next records.
    pub pending: Vec<u8>,
}

/// Why a record could not be opened, or why the session could not be continued.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the key does not fit the cipher suite")]
    Key,
    #[error("a TLS record of type {0} is not expected on an established session")]
    UnexpectedType(u8),
    #[error("a TLS record is longer than the protocol allows")]
    Oversized,
    #[error("a TLS record does not decrypt or verify")]
    Decrypt,
    #[error("a TLS record could not be encrypted")]
    Seal,
    #[error("the peer sent TLS alert {0}")]
    Alert(u8),
    #[error("the peer started a TLS handshake message (key update or renegotiation), which a session handed over from another router process cannot follow")]
    Handshake,
}

struct Direction {
    key: LessSafeKey,
    /// The key's bytes, to hand the session on again.
    raw: Vec<u8>,
    iv: [u8; 12],
    seq: u64,
}

impl Direction {
    fn thaw(cipher: Cipher, frozen: FrozenKeys) -> Result<Self, RecordError> {
        let unbound = UnboundKey::new(cipher.algorithm(), &frozen.key).map_err(|_| RecordError::Key)?;
        Ok(Self { key: LessSafeKey::new(unbound), raw: frozen.key, iv: frozen.iv, seq: frozen.seq })
    }

    fn freeze(&self) -> FrozenKeys {
        FrozenKeys { key: self.raw.clone(), iv: self.iv, seq: self.seq }
    }

    /// The IV with the sequence number folded into its last 8 bytes.
    fn nonce_bytes(&self) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }
}

/// What opening records found.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// Application data went to the caller's buffer (possibly none: more ciphertext is needed).
    Data,
    /// The peer sent close_notify: nothing follows.
    Closed,
}

/// An established TLS session's record layer.
pub struct Records {
    version: Version,
    cipher: Cipher,
    client: bool,
    tx: Direction,
    rx: Direction,
    pending: Vec<u8>,
}

impl Records {
    /// Continues the session `frozen` describes.
    pub fn thaw(frozen: FrozenTls) -> Result<Self, RecordError> {
        Ok(Self {
            version: frozen.version,
            cipher: frozen.cipher,
            client: frozen.client,
            tx: Direction::thaw(frozen.cipher, frozen.tx)?,
            rx: Direction::thaw(frozen.cipher, frozen.rx)?,
            pending: frozen.pending,
        })
    }

    /// The session as it travels on, `more` being ciphertext received after what it holds.
    pub fn freeze(self, more: &[u8]) -> FrozenTls {
        let mut pending = self.pending;
        pending.extend_from_slice(more);
        FrozenTls {
            version: self.version,
            cipher: self.cipher,
            tx: self.tx.freeze(),
            rx: self.rx.freeze(),
            client: self.client,
            pending,
        }
    }

    /// Takes ciphertext `raw` and appends the application data of every whole record to
    /// `plain`; an incomplete record waits for the rest.
    pub fn open(&mut self, raw: &[u8], plain: &mut Vec<u8>) -> Result<Opened, RecordError> {
        self.pending.extend_from_slice(raw);
        let mut at = 0;
        let mut opened = Ok(Opened::Data);
        while self.pending.len() - at >= HEADER {
            let mut head = [0; HEADER];
            head.copy_from_slice(&self.pending[at..at + HEADER]);
            let len = usize::from(u16::from_be_bytes([head[3], head[4]]));
            if len > CIPHER_MAX + EXPLICIT {
                opened = Err(RecordError::Oversized);
                break;
            }
            if self.pending.len() - at < HEADER + len {
                break;
            }
            let body_at = at + HEADER;
            at = body_at + len;
            // Opened in place: the body's bytes become the plaintext, copied out once.
            let mut body = std::mem::take(&mut self.pending);
            let step = self.open_record(head, &mut body[body_at..at], plain);
            self.pending = body;
            match step {
                Ok(true) => {}
                Ok(false) => {
                    opened = Ok(Opened::Closed);
                    break;
                }
                Err(e) => {
                    opened = Err(e);
                    break;
                }
            }
        }
        self.pending.drain(..at);
        opened
    }

    /// Opens one record; `false`: it was the peer's close_notify.
    fn open_record(&mut self, head: [u8; HEADER], body: &mut [u8], plain: &mut Vec<u8>) -> Result<bool, RecordError> {
        let outer = head[0];
        let explicit = self.cipher.explicit_nonce(self.version);
        if body.len() < explicit + TAG {
            return Err(RecordError::Decrypt);
        }
        let mut nonce = self.rx.nonce_bytes();
        if explicit > 0 {
            nonce[4..].copy_from_slice(&body[..EXPLICIT]);
        }
        let seq = self.rx.seq;
        let (typ, data) = match self.version {
            Version::Tls13 => {
                if outer != APPLICATION_DATA {
                    return Err(RecordError::UnexpectedType(outer));
                }
                let data = open(&self.rx.key, nonce, &head, body)?;
                // The inner plaintext is content, its type, then zero padding.
                let end = data.iter().rposition(|&b| b != 0).ok_or(RecordError::Decrypt)?;
                (data[end], &data[..end])
            }
            Version::Tls12 => {
                let sealed = &mut body[explicit..];
                let aad = tls12_aad(seq, outer, [head[1], head[2]], sealed.len() - TAG);
                (outer, open(&self.rx.key, nonce, &aad, sealed)?)
            }
        };
        self.rx.seq += 1;
        if data.len() > PLAIN_MAX {
            return Err(RecordError::Oversized);
        }
        match typ {
            APPLICATION_DATA => {
                plain.extend_from_slice(data);
                Ok(true)
            }
            ALERT if data.len() == 2 && data[1] == CLOSE_NOTIFY => Ok(false),
            ALERT => Err(RecordError::Alert(data.get(1).copied().unwrap_or(0))),
            // A server may send a TLS 1.3 client more session tickets at any time; this end
            // does not resume sessions, so they are dropped as rustls would keep them unused.
            HANDSHAKE if self.client && self.version == Version::Tls13 && data.first() == Some(&NEW_SESSION_TICKET) => {
                Ok(true)
            }
            HANDSHAKE => Err(RecordError::Handshake),
            other => Err(RecordError::UnexpectedType(other)),
        }
    }

    /// Appends `data` as application-data records to `out`.
    pub fn seal(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        let explicit = self.cipher.explicit_nonce(self.version);
        let inner_type = usize::from(self.version == Version::Tls13);
        for chunk in data.chunks(PLAIN_MAX) {
            let nonce = self.tx.nonce_bytes();
            let len = explicit + chunk.len() + inner_type + TAG;
            let head = [APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
            out.extend_from_slice(&head);
            if explicit > 0 {
                out.extend_from_slice(&nonce[4..]);
            }
            let start = out.len();
            out.extend_from_slice(chunk);
            let aad = match self.version {
                Version::Tls13 => {
                    out.push(APPLICATION_DATA);
                    head.to_vec()
                }
                Version::Tls12 => tls12_aad(self.tx.seq, APPLICATION_DATA, [3, 3], chunk.len()).to_vec(),
            };
            let mut sealed = out.split_off(start);
            self.tx
                .key
                .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut sealed)
                .map_err(|_| RecordError::Seal)?;
            out.extend_from_slice(&sealed);
            self.tx.seq += 1;
        }
        Ok(())
    }
}

/// Opens `sealed` (ciphertext then tag) in place; the plaintext.
fn open<'a>(key: &LessSafeKey, nonce: [u8; 12], aad: &[u8], sealed: &'a mut [u8]) -> Result<&'a [u8], RecordError> {
    let nonce = Nonce::assume_unique_for_key(nonce);
    key.open_in_place(nonce, Aad::from(aad), sealed).map(|p| &*p).map_err(|_| RecordError::Decrypt)
}

/// TLS 1.2's additional data: the record's sequence number, type, version and plaintext length.
fn tls12_aad(seq: u64, typ: u8, version: [u8; 2], len: usize) -> [u8; 13] {
    let mut aad = [0; 13];
    aad[..8].copy_from_slice(&seq.to_be_bytes());
    aad[8] = typ;
    aad[9..11].copy_from_slice(&version);
    aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
    aad
}

/// Where a stream of ciphertext stands in its records: a session hands over only between two.
#[derive(Default)]
pub struct RecordCursor {
    header: [u8; HEADER],
    have: usize,
    left: usize,
}

impl RecordCursor {
    /// Follows `raw`, the next bytes of the stream.
    pub fn advance(&mut self, mut raw: &[u8]) {
        while !raw.is_empty() {
            if self.left > 0 {
                let n = self.left.min(raw.len());
                self.left -= n;
                raw = &raw[n..];
                continue;
            }
            let n = (HEADER - self.have).min(raw.len());
            self.header[self.have..self.have + n].copy_from_slice(&raw[..n]);
            self.have += n;
            raw = &raw[n..];
            if self.have == HEADER {
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.have = 0;
            }
        }
    }

    /// Every record the stream began has ended.
    pub fn between_records(&self) -> bool {
        self.have == 0 && self.left == 0
    }
}
