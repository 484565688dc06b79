import Foundation
import SiblingsCrypto

/// The key-transparency labels identity-svc logs under (docs/pixie-protocol.md, "Labels and values"); a device
/// computes the same ones to look its bindings up.
public enum KeyTransparencyLabel {
    /// `discovery/<phone_id base64url>`: ``KeyTransparencyCommitment/discovery(inbox:discoveryKey:ktHandle:)``.
    public static func discovery(phoneID: Data) -> String { "discovery/" + phoneID.base64URLEncodedString() }
    /// `account/<kt_handle>`: the account signing public key (1984).
    public static func account(ktHandle: String) -> String { "account/" + ktHandle }
    /// `devices/<kt_handle>`: ``KeyTransparencyCommitment/roster(_:)`` of the account's devices.
    public static func devices(ktHandle: String) -> String { "devices/" + ktHandle }
    /// `account-rotation/<kt_handle>`: ``AccountRotation/encoded``, one version per rotation (docs/pixie-protocol.md,
    /// "Revoking a device").
    public static func accountRotation(ktHandle: String) -> String { "account-rotation/" + ktHandle }
}

/// One device of an account's roster as `GET /v1/sync/siblings` lists it and the log commits to it: the device's
/// identity key, the relay inbox its siblings send to, and the X-Wing key they seal to. Devices enrolled before
/// issue 15 have no inbox and no sealing key.
public struct RosterDevice: Sendable, Equatable {
    public var pubkey: Data
    public var inbox: RelaySubject?
    /// An X-Wing (X-Wing-MLKEM768-X25519) public key, 1216 bytes.
    public var sealingKey: Data?

    public init(pubkey: Data, inbox: RelaySubject?, sealingKey: Data?) {
        self.pubkey = pubkey
        self.inbox = inbox
        self.sealingKey = sealingKey
    }
}

/// The values identity-svc logs that a device recomputes to compare with what it was told.
public enum KeyTransparencyCommitment {
    /// The `discovery/<phone_id>` value (version 2, issue 16): discovery_inbox (32) ‖ discovery_xwing_pubkey (1216)
    /// ‖ kt_handle (UTF-8, the rest). The handle binds the number to its account, so a new device takes an
    /// approval only for the account the log says the number belongs to. Version 1 (issue 7) had no handle; an
    /// account logged under it is logged again under version 2 by the start-up reconciliation.
    public static func discovery(inbox: RelaySubject, discoveryKey: Data, ktHandle: String) -> Data {
        inbox.rawRepresentation + discoveryKey + Data(ktHandle.utf8)
    }

    /// A `discovery/<phone_id>` value, read back.
    public struct DiscoveryBinding: Sendable, Equatable {
        public let inbox: RelaySubject
        /// An X-Wing public key (1216 bytes).
        public let discoveryKey: Data
        public let ktHandle: String

        /// Nil for a value that is not version 2 (one without a handle included).
        public init?(logged: Data) {
            let keyEnd = RelaySubject.byteCount + 1216
            guard logged.count > keyEnd,
                let inbox = try? RelaySubject(rawRepresentation: logged.prefix(RelaySubject.byteCount)),
                let handle = String(data: logged.dropFirst(keyEnd), encoding: .utf8)
            else { return nil }
            self.inbox = inbox
            discoveryKey = Data(logged.dropFirst(RelaySubject.byteCount).prefix(1216))
            ktHandle = handle
        }
    }

    /// The `devices/<kt_handle>` value (version 2, issue 15):
    ///
    ///     SHA-256("pixie/kt/devices/v2" ‖ count (4) ‖ for each device, in byte order of pubkey:
    ///             pubkey length (2) ‖ pubkey ‖ inbox (32; zeros when none) ‖ sealing key length (2) ‖ sealing key)
    ///
    /// (integers big-endian), so the log commits to each sibling's addressing as well as its key: a roster the
    /// server altered (a device added, dropped, or given another inbox or sealing key) does not match. Version 1
    /// covered the pubkeys only; an account logged under it is logged again under version 2 when its server
    /// first starts with this code (the migration marks every account for the start-up reconciliation).
    public static func roster(_ devices: [RosterDevice]) -> Data {
        var input = Data("pixie/kt/devices/v2".utf8)
        withUnsafeBytes(of: UInt32(devices.count).bigEndian) { input.append(contentsOf: $0) }
        for device in devices.sorted(by: { $0.pubkey.lexicographicallyPrecedes($1.pubkey) }) {
            withUnsafeBytes(of: UInt16(device.pubkey.count).bigEndian) { input.append(contentsOf: $0) }
            input += device.pubkey
            input += device.inbox?.rawRepresentation ?? Data(count: RelaySubject.byteCount)
            let sealing = device.sealingKey ?? Data()
            withUnsafeBytes(of: UInt16(sealing.count).bigEndian) { input.append(contentsOf: $0) }
            input += sealing
        }
        return Data(SHA256.hash(data: input))
    }
}
