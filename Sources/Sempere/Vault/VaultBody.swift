import Foundation

/// The signed body of vault.json (docs/sempere-format.md, "vault.json"): the device list, the recovery
/// kit's public keys, the epochs with their key wraps, and the records of earlier epochs.
public struct VaultBody: Codable, Sendable, Equatable {
    public var vaultID: String
    /// Grows by one with every change home makes; devices refuse anything lower than they have seen.
    public var generation: UInt64
    /// The device that manages devices ("Manages devices").
    public var home: String
    /// Grows with each handoff or takeover (part 2).
    public var homeGeneration: UInt64
    public var postQuantum: Bool
    public var devices: [Device]
    public var removed: [Removal]
    public var recovery: Recovery
    public var epochs: [Epoch]
    public var records: [Record]

    public struct Device: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        /// The device's HybridSignature public key (1984 bytes).
        public var signingKey: Data
        /// The age recipient its wraps are encrypted to (`age1...` or `age1pq1...`).
        public var wrapRecipient: String
        public var addedIn: UInt64

        enum CodingKeys: String, CodingKey {
            case id, name, signingKey = "signing_key", wrapRecipient = "wrap_recipient", addedIn = "added_in"
        }

        public init(id: String, name: String, signingKey: Data, wrapRecipient: String, addedIn: UInt64) {
            self.id = id
            self.name = name
            self.signingKey = signingKey
            self.wrapRecipient = wrapRecipient
            self.addedIn = addedIn
        }
    }

    /// A removed device, kept whole so the notes it wrote while it was listed still verify.
    public struct Removal: Codable, Sendable, Equatable {
        public var device: Device
        public var removedIn: UInt64

        enum CodingKeys: String, CodingKey {
            case device, removedIn = "removed_in"
        }
    }

    public struct Recovery: Codable, Sendable, Equatable {
        public var kitID: String
        public var signingKey: Data
        public var wrapRecipient: String

        enum CodingKeys: String, CodingKey {
            case kitID = "kit_id", signingKey = "signing_key", wrapRecipient = "wrap_recipient"
        }
    }

    public struct Epoch: Codable, Sendable, Equatable {
        public var number: Int
        public var startedIn: UInt64
        /// Why it started: "created", "removed", later "handoff", "takeover", "kit".
        public var reason: String
        /// The epoch's vault recipient: every note of this epoch is encrypted to it, once.
        public var recipient: String
        /// The epoch's vault identity, as an armored age file to each holder (device id, or "recovery").
        public var wraps: [String: String]

        enum CodingKeys: String, CodingKey {
            case number, startedIn = "started_in", reason, recipient, wraps
        }
    }

    public struct Record: Codable, Sendable, Equatable {
        public var epoch: Int
        /// That epoch's vault identity, as an armored age file to the next epoch's recipient.
        public var sealedIdentity: String
        /// The notes that existed when the epoch ended.
        public var notes: [NoteReference]

        enum CodingKeys: String, CodingKey {
            case epoch, sealedIdentity = "sealed_identity", notes
        }
    }

    public struct NoteReference: Codable, Sendable, Equatable {
        public var path: String
        /// SHA-256 of the note file's bytes, lower-case hex.
        public var sha256: String

        public init(path: String, sha256: String) {
            self.path = path
            self.sha256 = sha256
        }
    }

    enum CodingKeys: String, CodingKey {
        case vaultID = "vault_id", generation, home, homeGeneration = "home_generation", postQuantum = "post_quantum"
        case devices, removed, recovery, epochs, records
    }

    public var currentEpoch: Epoch { epochs[epochs.count - 1] }

    public func device(_ id: String) -> Device? { devices.first { $0.id == id } }

    /// The canonical bytes: sorted keys, no extra whitespace, binary as base64. Only the signer serialises;
    /// readers verify the exact bytes stored (docs/sempere-format.md).
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dataEncodingStrategy = .base64
        return try encoder.encode(self)
    }

    static func decode(_ bytes: Data) throws -> VaultBody {
        let decoder = JSONDecoder()
        decoder.dataDecodingStrategy = .base64
        do {
            return try decoder.decode(VaultBody.self, from: bytes)
        } catch {
            throw SempereError(
                .malformedVault,
                "vault.json's body is not a vault body this version reads: \(plainDescription(of: error))")
        }
    }
}
