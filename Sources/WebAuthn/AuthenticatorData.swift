import Foundation
import SiblingsCrypto

/// authenticatorData (WebAuthn L3 §6.1): `rpIdHash (32) ‖ flags (1) ‖ signCount (4, big-endian)`,
/// then attested credential data if AT is set (§6.5.1), then a CBOR map of extension outputs if ED is set.
///
/// Parsing is strict: truncated data, bytes after the last field, a credential ID longer than 1023 bytes
/// (§7.1 step 25) or empty, and BS set without BE (§6.1: "If BE is not set, BS MUST NOT be set") are
/// refused.
public struct AuthenticatorData: Sendable, Equatable {
    /// The flags byte (§6.1, table "Flags").
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Bit 0, UP: the user was present.
        public static let userPresent = Flags(rawValue: 0x01)
        /// Bit 2, UV: the user was verified (biometrics, PIN).
        public static let userVerified = Flags(rawValue: 0x04)
        /// Bit 3, BE: the credential is backup eligible (a synced passkey can be).
        public static let backupEligible = Flags(rawValue: 0x08)
        /// Bit 4, BS: the credential is currently backed up.
        public static let backupState = Flags(rawValue: 0x10)
        /// Bit 6, AT: attested credential data follows.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// Bit 7, ED: extension data follows.
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// SHA-256 of the RP ID the authenticator scoped the credential to.
    public let rpIDHash: Data
    public let flags: Flags
    /// The signature counter (0 when the authenticator keeps none, as most passkey providers do).
    public let signCount: UInt32
    /// Present exactly when ``Flags/attestedCredentialData`` is set.
    public let attestedCredentialData: AttestedCredentialData?
    /// The extension outputs map, present exactly when ``Flags/extensionData`` is set.
    public let extensions: CBOR?
    /// The bytes as received or built: what assertion signatures cover.
    public let rawRepresentation: Data

    /// Builds authenticatorData; AT and ED are set from the optional fields, whatever `flags` says.
    public init(
        rpIDHash: Data, flags: Flags, signCount: UInt32, attestedCredentialData: AttestedCredentialData? = nil,
        extensions: CBOR? = nil
    ) {
        precondition(rpIDHash.count == 32, "rpIdHash is 32 bytes (SHA-256)")
        var flags = flags.subtracting([.attestedCredentialData, .extensionData])
        if attestedCredentialData != nil { flags.insert(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) }
        self.rpIDHash = rpIDHash
        self.flags = flags
        self.signCount = signCount
        self.attestedCredentialData = attestedCredentialData
        self.extensions = extensions
        var raw = rpIDHash
        raw.append(flags.rawValue)
        raw.append(contentsOf: withUnsafeBytes(of: signCount.bigEndian) { Array($0) })
        if let attested = attestedCredentialData {
            raw.append(attested.aaguid)
            raw.append(contentsOf: [UInt8(attested.credentialID.count >> 8), UInt8(attested.credentialID.count & 0xff)])
            raw.append(attested.credentialID)
            raw.append(attested.credentialPublicKey)
        }
        if let extensions { raw.append(extensions.encoded()) }
        rawRepresentation = raw
    }

    /// Parses authenticatorData (§6.1), refusing anything malformed with
    /// ``WebAuthnError/Code/invalidAuthenticatorData`` (or ``WebAuthnError/Code/invalidBackupFlags``).
    public init(rawRepresentation: some DataProtocol) throws {
        let bytes = [UInt8](rawRepresentation)
        guard bytes.count >= 37 else {
            throw WebAuthnError(
                .invalidAuthenticatorData, "authenticatorData is \(bytes.count) bytes; it has at least 37")
        }
        rpIDHash = Data(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        if flags.contains(.backupState) && !flags.contains(.backupEligible) {
            throw WebAuthnError(
                .invalidBackupFlags,
                "authenticatorData sets BS (backed up) without BE (backup eligible), which §6.1 forbids")
        }
        var index = 37
        if flags.contains(.attestedCredentialData) {
            guard bytes.count - index >= 18 else {
                throw WebAuthnError(
                    .invalidAuthenticatorData, "attested credential data is truncated before the credential ID")
            }
            let aaguid = Data(bytes[index..<index + 16])
            let length = Int(bytes[index + 16]) << 8 | Int(bytes[index + 17])
            index += 18
            guard length >= 1, length <= 1023 else {
                throw WebAuthnError(
                    .invalidCredentialID,
                    "credentialIdLength is \(length); WebAuthn allows 1 to 1023 bytes (§7.1 step 25)")
            }
            guard bytes.count - index >= length else {
                throw WebAuthnError(
                    .invalidAuthenticatorData, "attested credential data is truncated inside the credential ID")
            }
            let credentialID = Data(bytes[index..<index + length])
            index += length
            let key: CBOR
            let end: Int
            do {
                (key, end) = try CBORDecoder().decodePrefix(bytes, from: index)
            } catch let error as WebAuthnError {
                throw WebAuthnError(
                    .invalidAuthenticatorData, "the credential public key is not valid CBOR: \(error.reason)")
            }
            guard key.mapValue != nil else {
                throw WebAuthnError(.invalidAuthenticatorData, "the credential public key is not a COSE_Key map")
            }
            attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid, credentialID: credentialID, credentialPublicKey: Data(bytes[index..<end]))
            index = end
        } else {
            attestedCredentialData = nil
        }
        if flags.contains(.extensionData) {
            let item: CBOR
            let end: Int
            do {
                (item, end) = try CBORDecoder().decodePrefix(bytes, from: index)
            } catch let error as WebAuthnError {
                throw WebAuthnError(.invalidAuthenticatorData, "the extensions are not valid CBOR: \(error.reason)")
            }
            guard item.mapValue != nil else {
                throw WebAuthnError(.invalidAuthenticatorData, "the extensions (ED set) are not a CBOR map")
            }
            extensions = item
            index = end
        } else {
            extensions = nil
        }
        guard index == bytes.count else {
            throw WebAuthnError(
                .invalidAuthenticatorData, "\(bytes.count - index) trailing bytes after authenticatorData's last field")
        }
        self.rawRepresentation = Data(bytes)
    }
}

/// Attested credential data (WebAuthn L3 §6.5.1): `aaguid (16) ‖ credentialIdLength (2) ‖ credentialId ‖
/// credentialPublicKey (COSE_Key)`.
public struct AttestedCredentialData: Sendable, Equatable {
    /// The authenticator model's AAGUID (all zero when the client hides it).
    public let aaguid: Data
    public let credentialID: Data
    /// The COSE_Key bytes exactly as the authenticator wrote them (parse with ``COSEKey``).
    public let credentialPublicKey: Data

    public init(aaguid: Data, credentialID: Data, credentialPublicKey: Data) {
        precondition(aaguid.count == 16, "an AAGUID is 16 bytes")
        // Not 1...1023: tests build out-of-range IDs to see them refused; the parser enforces the range.
        precondition(credentialID.count <= 0xffff, "credentialIdLength is a 16-bit field")
        self.aaguid = aaguid
        self.credentialID = credentialID
        self.credentialPublicKey = credentialPublicKey
    }
}
