import Foundation

/// The served OPRF key list: every public key credential-svc issues tokens under, with its token_key_id and
/// validity, for one epoch. Its ``encoded`` form is the value of the label ``logLabel`` (`oprf-keys`) in the
/// transparency log, so every client can check it holds the same list as everyone else: a key outside the logged
/// list could be one minted for a single client, which would make its tokens linkable.
///
/// Canonical encoding (big-endian integers; one encoding per list, so equal lists log equal bytes):
///
///     version        1   0x01
///     token_type     2   0xF1A7 (``Token/tokenType``): the suite the keys are for
///     epoch          8   the list's epoch, increasing with every change
///     count          2   n, 1 ≤ n ≤ 1024
///     entries    n × 80   sorted by token_key_id, strictly ascending (no duplicates):
///         token_key_id  32   SHA-256 of public_key
///         public_key    32   ristretto255 element (not the identity)
///         not_before     8   Unix seconds, first second the key may be used
///         not_after      8   Unix seconds, last second the key may be used (≥ not_before)
///
/// The decoder refuses anything else: another version or token type, trailing bytes, an unsorted or duplicated
/// entry, a token_key_id that is not the key's hash, an invalid key.
public struct KeyList: Sendable, Hashable {
    /// The transparency-log label whose value is ``encoded``.
    public static let logLabel = "oprf-keys"
    /// The transparency-log label of the upload-class key list (tokens that pay blob uploads only).
    public static let uploadLogLabel = "oprf-keys/upload"
    public static let version: UInt8 = 1
    public static let maximumEntryCount = 1024

    /// One served key.
    public struct Entry: Sendable, Hashable {
        public let publicKey: VOPRF.PublicKey
        /// First and last second (Unix time) of the key's use, inclusive.
        public let notBefore: UInt64
        public let notAfter: UInt64

        public init(publicKey: VOPRF.PublicKey, notBefore: UInt64, notAfter: UInt64) throws {
            guard notBefore <= notAfter else {
                throw PrivacyPassError(
                    .invalidInput, "a key's not_before (\(notBefore)) must not be after its not_after (\(notAfter))")
            }
            self.publicKey = publicKey
            self.notBefore = notBefore
            self.notAfter = notAfter
        }

        /// SHA-256 of the public key.
        public var tokenKeyID: Data { publicKey.tokenKeyID }

        /// Whether `date` falls in [not_before, not_after].
        public func isValid(at date: Date) -> Bool {
            let seconds = date.timeIntervalSince1970
            return seconds >= Double(notBefore) && seconds < Double(notAfter) + 1
        }
    }

    public let epoch: UInt64
    /// The entries, sorted by token_key_id.
    public let entries: [Entry]

    /// A list of 1 to 1024 distinct keys; the entries are sorted into canonical order.
    public init(epoch: UInt64, entries: [Entry]) throws {
        guard !entries.isEmpty, entries.count <= KeyList.maximumEntryCount else {
            throw PrivacyPassError(.invalidInput, "a key list has 1 to 1024 keys, not \(entries.count)")
        }
        let sorted = entries.map { (id: [UInt8]($0.tokenKeyID), entry: $0) }.sorted {
            $0.id.lexicographicallyPrecedes($1.id)
        }
        for i in sorted.indices.dropFirst() where sorted[i - 1].id == sorted[i].id {
            throw PrivacyPassError(.invalidInput, "a key list names the same key twice")
        }
        self.epoch = epoch
        self.entries = sorted.map(\.entry)
    }

    /// The entry for `publicKey`, if the list has it.
    public func entry(for publicKey: VOPRF.PublicKey) -> Entry? {
        entries.first { $0.publicKey == publicKey }
    }

    /// The canonical encoding: the value logged under ``logLabel``.
    public var encoded: Data {
        var out = Data([KeyList.version, UInt8(Token.tokenType >> 8), UInt8(Token.tokenType & 0xFF)])
        out += bigEndian(epoch, bytes: 8)
        out += bigEndian(UInt64(entries.count), bytes: 2)
        for entry in entries {
            out += entry.tokenKeyID
            out += entry.publicKey.rawRepresentation
            out += bigEndian(entry.notBefore, bytes: 8)
            out += bigEndian(entry.notAfter, bytes: 8)
        }
        return out
    }

    /// Decodes a canonical encoding (as read from the transparency log); refuses every other byte string.
    public init(encoded: some DataProtocol) throws {
        let bytes = [UInt8](encoded)
        func malformed(_ what: String) -> PrivacyPassError {
            PrivacyPassError(.malformedMessage, "the OPRF key list does not parse: \(what); refuse to mint with it")
        }
        guard bytes.count >= 13 else { throw malformed("\(bytes.count) bytes is shorter than its header") }
        guard bytes[0] == KeyList.version else { throw malformed("version \(bytes[0]) is not 1") }
        guard UInt16(bytes[1]) << 8 | UInt16(bytes[2]) == Token.tokenType else {
            throw malformed("it is for another token type")
        }
        let epoch = readBigEndian(bytes[3..<11])
        let count = Int(readBigEndian(bytes[11..<13]))
        guard count >= 1, count <= KeyList.maximumEntryCount else { throw malformed("it counts \(count) keys") }
        guard bytes.count == 13 + count * 80 else {
            throw malformed("\(count) keys take \(13 + count * 80) bytes, not \(bytes.count)")
        }
        var entries: [Entry] = []
        var previous: [UInt8]?
        for i in 0..<count {
            let base = 13 + i * 80
            let id = Array(bytes[base..<base + 32])
            let key = try VOPRF.PublicKey(rawRepresentation: bytes[base + 32..<base + 64])
            guard [UInt8](key.tokenKeyID) == id else { throw malformed("entry \(i)'s token_key_id is not its hash") }
            if let previous, !previous.lexicographicallyPrecedes(id) {
                throw malformed("entry \(i) is out of order or repeated")
            }
            previous = id
            let notBefore = readBigEndian(bytes[base + 64..<base + 72])
            let notAfter = readBigEndian(bytes[base + 72..<base + 80])
            guard notBefore <= notAfter else { throw malformed("entry \(i) ends before it starts") }
            entries.append(try Entry(publicKey: key, notBefore: notBefore, notAfter: notAfter))
        }
        self.epoch = epoch
        self.entries = entries
    }
}

private func bigEndian(_ value: UInt64, bytes: Int) -> Data {
    Data((0..<bytes).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) })
}

private func readBigEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 {
    bytes.reduce(0) { $0 << 8 | UInt64($1) }
}

/// Checks a served OPRF key list against the transparency log before a client mints with it.
///
/// 000_e422bd9a7c930342.txt: "The token mint takes a verifier for the served OPRF key list", and the call site
/// that passed nothing is "the worst possible place to skip it": a pre-session mint on a new device has no
/// earlier state to contradict a server that hands it a key of its own. The Pixie device SDK's
/// PixieDevice's `LoggedBindings` is the implementation that checks the log; tests may supply others.
public protocol KeyListVerifier: Sendable {
    /// The key list logged under ``KeyList/logLabel``, once it is proven current in the log and equal, byte for
    /// byte, to `served` (what credential-svc handed out). Throws when it cannot prove that: no proof, a proof
    /// that fails, or a served list that is not the logged one.
    func loggedKeyList(matching served: Data) async throws -> KeyList
}
