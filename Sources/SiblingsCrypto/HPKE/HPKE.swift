import Foundation

/// Hybrid Public Key Encryption (RFC 9180), base mode, with KEM X-Wing (0x647a), KDF HKDF-SHA256
/// (0x0001) and AEAD AES-256-GCM (0x0002) or ChaCha20-Poly1305 (0x0003). Shaped like CryptoKit's HPKE:
/// a `Sender` that seals to a recipient's key, a `Recipient` that opens, a `Ciphersuite(kem:kdf:aead:)`
/// with CryptoKit's case names (only the ones this package implements).
public enum HPKE {
    /// The KEMs (RFC 9180, section 7.1; X-Wing's id from draft-connolly-cfrg-xwing-kem).
    public enum KEM: UInt16, CaseIterable, Hashable, Sendable {
        case XWingMLKEM768X25519 = 0x647a
    }

    /// The KDFs (RFC 9180, section 7.2).
    public enum KDF: UInt16, CaseIterable, Hashable, Sendable {
        case HKDF_SHA256 = 0x0001
    }

    /// The AEADs (RFC 9180, section 7.3).
    public enum AEAD: UInt16, CaseIterable, Hashable, Sendable {
        case AES_GCM_256 = 0x0002
        case chaChaPoly = 0x0003
    }

    /// A ciphersuite: KEM, KDF and AEAD (CryptoKit's `HPKE.Ciphersuite`).
    public struct Ciphersuite: Sendable, Hashable {
        public let kem: KEM
        public let kdf: KDF
        public let aead: AEAD

        public init(kem: KEM, kdf: KDF, aead: AEAD) {
            self.kem = kem
            self.kdf = kdf
            self.aead = aead
        }

        /// X-Wing, HKDF-SHA256, AES-256-GCM (CryptoKit's name).
        public static let XWingMLKEM768X25519_SHA256_AES_GCM_256 = Ciphersuite(
            kem: .XWingMLKEM768X25519, kdf: .HKDF_SHA256, aead: .AES_GCM_256)
        /// X-Wing, HKDF-SHA256, ChaCha20-Poly1305: age's mlkem768x25519 stanza uses this one.
        public static let XWingMLKEM768X25519_SHA256_ChachaPoly = Ciphersuite(
            kem: .XWingMLKEM768X25519, kdf: .HKDF_SHA256, aead: .chaChaPoly)

        /// suite_id = "HPKE" ‖ I2OSP(kem_id, 2) ‖ I2OSP(kdf_id, 2) ‖ I2OSP(aead_id, 2) (RFC 9180, section 5.1).
        var identifier: Data {
            Data("HPKE".utf8) + bigEndian(kem.rawValue) + bigEndian(kdf.rawValue) + bigEndian(aead.rawValue)
        }
    }

    /// HPKE's DeriveKeyPair for X-Wing: the private key is SHAKE256(ikm, 32) used as an X-Wing seed
    /// (draft-connolly-cfrg-xwing-kem), hashed straight into wiped memory.
    public static func deriveKeyPair(inputKeyMaterial: some DataProtocol) throws -> XWing.PrivateKey {
        let seed = SecureBytes(count: XWing.seedByteCount) { out in
            withContiguousBytes(inputKeyMaterial) { base, count in
                DigestContext.keccak(.shake256, UnsafeRawBufferPointer(start: base, count: count), into: out)
            }
        }
        return XWing.PrivateKey(validSeed: seed)
    }

    /// The sending side of a base-mode context (RFC 9180, sections 5.1.1 and 5.2).
    public struct Sender: Sendable {
        /// enc: the X-Wing ciphertext to send ahead of the sealed messages (1120 bytes).
        public let encapsulatedKey: Data
        private var context: Context

        public init(recipientKey: XWing.PublicKey, ciphersuite: Ciphersuite, info: some DataProtocol) throws {
            try self.init(
                recipientKey: recipientKey, ciphersuite: ciphersuite, info: info,
                encapsulation: try recipientKey.encapsulate())
        }

        /// The derandomized form, for known-answer tests only (`@_spi(Testing)`): `randomness` is X-Wing's
        /// 64-byte eseed.
        @_spi(Testing)
        public init(
            recipientKey: XWing.PublicKey, ciphersuite: Ciphersuite, info: some DataProtocol,
            randomness: some DataProtocol
        ) throws {
            try self.init(
                recipientKey: recipientKey, ciphersuite: ciphersuite, info: info,
                encapsulation: try recipientKey.encapsulate(randomness: randomness))
        }

        private init(
            recipientKey: XWing.PublicKey, ciphersuite: Ciphersuite, info: some DataProtocol,
            encapsulation: SiblingsCrypto.KEM.EncapsulationResult
        ) throws {
            encapsulatedKey = encapsulation.encapsulated
            context = try Context(sharedSecret: encapsulation.sharedSecret, ciphersuite: ciphersuite, info: info.asData)
        }

        /// Seals the next message (Seal, section 5.2); each call uses the next nonce.
        public mutating func seal(
            _ message: some DataProtocol, authenticating aad: some DataProtocol = Data()
        ) throws -> Data {
            try context.seal(message, aad: aad)
        }

        /// Secret export (section 5.3).
        public func exportSecret(
            context exporterContext: some DataProtocol, outputByteCount: Int
        ) throws -> SymmetricKey {
            try context.export(exporterContext, outputByteCount: outputByteCount)
        }
    }

    /// The receiving side of a base-mode context.
    public struct Recipient: Sendable {
        private var context: Context

        /// Decapsulates `encapsulatedKey` with `privateKey` and sets up the context.
        public init(
            privateKey: XWing.PrivateKey, ciphersuite: Ciphersuite, info: some DataProtocol,
            encapsulatedKey: some DataProtocol
        ) throws {
            let sharedSecret = try privateKey.decapsulate(encapsulatedKey)
            context = try Context(sharedSecret: sharedSecret, ciphersuite: ciphersuite, info: info.asData)
        }

        /// Opens the next message (Open, section 5.2); throws `.authenticationFailure` when it was altered,
        /// sealed under another context, or out of order.
        public mutating func open(
            _ ciphertext: some DataProtocol, authenticating aad: some DataProtocol = Data()
        ) throws -> Data {
            try context.open(ciphertext, aad: aad)
        }

        public func exportSecret(
            context exporterContext: some DataProtocol, outputByteCount: Int
        ) throws -> SymmetricKey {
            try context.export(exporterContext, outputByteCount: outputByteCount)
        }
    }

    /// The key schedule's output and the sequence number (RFC 9180, section 5.1).
    struct Context: Sendable {
        let ciphersuite: Ciphersuite
        let key: SymmetricKey
        let baseNonce: Data
        let exporterSecret: SymmetricKey
        var sequence: UInt64 = 0

        init(sharedSecret: SymmetricKey, ciphersuite: Ciphersuite, info: Data) throws {
            self.ciphersuite = ciphersuite
            let suite = ciphersuite.identifier
            let pskIDHash = try HPKE.labeledExtract(suite, salt: Data(), label: "psk_id_hash", ikm: Data())
            let infoHash = try HPKE.labeledExtract(suite, salt: Data(), label: "info_hash", ikm: info)
            let keyScheduleContext =
                Data([0x00]) + pskIDHash.withUnsafeBytes { Data($0) } + infoHash.withUnsafeBytes { Data($0) }
            // The shared secret is the salt (psk is empty in base mode): HMAC keyed with it, in wiped memory.
            let secret = HKDF<SHA256>.extract(
                inputKeyMaterial: HPKE.labeledIKM(suite, label: "secret", ikm: Data()), secretSalt: sharedSecret)
            key = try HPKE.labeledExpand(suite, prk: secret, label: "key", info: keyScheduleContext, length: 32)
            baseNonce = try HPKE.labeledExpand(
                suite, prk: secret, label: "base_nonce", info: keyScheduleContext, length: 12
            )
            .withUnsafeBytes { Data($0) }
            exporterSecret = try HPKE.labeledExpand(
                suite, prk: secret, label: "exp", info: keyScheduleContext, length: 32)
        }

        /// base_nonce XOR I2OSP(seq, Nn).
        private func nonce() -> Data {
            var nonce = baseNonce
            for index in 0..<8 {
                nonce[nonce.count - 1 - index] ^= UInt8(truncatingIfNeeded: sequence >> (8 * index))
            }
            return nonce
        }

        private mutating func advance() throws {
            guard sequence < UInt64.max else {
                throw CryptoError(
                    .invalidParameter, "this HPKE context has sealed as many messages as it may; start a new one")
            }
            sequence += 1
        }

        mutating func seal(_ message: some DataProtocol, aad: some DataProtocol) throws -> Data {
            let sealed: Data
            switch ciphersuite.aead {
            case .AES_GCM_256:
                let box = try AES.GCM.seal(
                    message, using: key, nonce: try AES.GCM.Nonce(data: nonce()), authenticating: aad)
                sealed = box.ciphertext + box.tag
            case .chaChaPoly:
                let box = try ChaChaPoly.seal(
                    message, using: key, nonce: try ChaChaPoly.Nonce(data: nonce()), authenticating: aad)
                sealed = box.ciphertext + box.tag
            }
            try advance()
            return sealed
        }

        mutating func open(_ ciphertext: some DataProtocol, aad: some DataProtocol) throws -> Data {
            let bytes = ciphertext.asData
            guard bytes.count >= 16 else {
                throw CryptoError(
                    .authenticationFailure, "an HPKE ciphertext is at least its 16-byte tag; got \(bytes.count) bytes")
            }
            let opened: Data
            switch ciphersuite.aead {
            case .AES_GCM_256:
                opened = try AES.GCM.open(
                    try AES.GCM.SealedBox(
                        nonce: try AES.GCM.Nonce(data: nonce()), ciphertext: bytes.dropLast(16), tag: bytes.suffix(16)),
                    using: key, authenticating: aad)
            case .chaChaPoly:
                opened = try ChaChaPoly.open(
                    try ChaChaPoly.SealedBox(
                        nonce: try ChaChaPoly.Nonce(data: nonce()), ciphertext: bytes.dropLast(16),
                        tag: bytes.suffix(16)),
                    using: key, authenticating: aad)
            }
            try advance()
            return opened
        }

        func export(_ exporterContext: some DataProtocol, outputByteCount: Int) throws -> SymmetricKey {
            try HPKE.labeledExpand(
                ciphersuite.identifier, prk: exporterSecret, label: "sec", info: exporterContext.asData,
                length: outputByteCount)
        }
    }

    /// LabeledExtract(salt, label, ikm) = Extract(salt, "HPKE-v1" ‖ suite_id ‖ label ‖ ikm) (section 4).
    static func labeledExtract(_ suite: Data, salt: Data, label: String, ikm: Data) throws -> SymmetricKey {
        try HKDF<SHA256>.extract(
            inputKeyMaterial: SymmetricKey(data: labeledIKM(suite, label: label, ikm: ikm)), salt: salt)
    }

    /// "HPKE-v1" ‖ suite_id ‖ label ‖ ikm, LabeledExtract's input keying material.
    static func labeledIKM(_ suite: Data, label: String, ikm: Data) -> Data {
        Data("HPKE-v1".utf8) + suite + Data(label.utf8) + ikm
    }

    /// LabeledExpand(prk, label, info, L) = Expand(prk, I2OSP(L, 2) ‖ "HPKE-v1" ‖ suite_id ‖ label ‖ info, L).
    static func labeledExpand(
        _ suite: Data, prk: SymmetricKey, label: String, info: Data, length: Int
    ) throws -> SymmetricKey {
        guard length > 0, length <= 0xffff else {
            throw CryptoError(.invalidParameter, "an HPKE export is 1 to 65535 bytes, asked for \(length)")
        }
        return try HKDF<SHA256>.expand(
            pseudoRandomKey: prk,
            info: bigEndian(UInt16(length)) + Data("HPKE-v1".utf8) + suite + Data(label.utf8) + info,
            outputByteCount: length)
    }
}

/// I2OSP(value, 2).
func bigEndian(_ value: UInt16) -> Data { Data([UInt8(value >> 8), UInt8(value & 0xff)]) }
