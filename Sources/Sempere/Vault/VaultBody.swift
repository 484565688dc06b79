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
    /// Every handoff of the home role, oldest first (empty in a v1 vault).
    public var handoffs: [Handoff]
    /// Grows by one with each takeover: a list with a higher one wins over any with a lower one,
    /// whatever their generations (0 in a v1 vault).
    public var takeoverGeneration: UInt64
    /// Every takeover, oldest first.
    public var takeovers: [Takeover]
    /// The first home, signed by the kit (nil in a vault made before sempere 0.2).
    public var genesis: Genesis?
    /// A kit replacement waiting for its delay, if any.
    public var kitReplacement: KitReplacement?
    /// Seconds a kit replacement by home alone waits (72 hours unless the vault says otherwise).
    public var kitReplacementDelay: Int64
    /// Every completed kit replacement, oldest first.
    public var kitChanges: [KitChange]
    /// Every Re-encrypt Everything home finished, oldest first: each commits to the list of the copies it
    /// wrote under its epoch's key (``ReencryptionList``).
    public var reencryptions: [Reencryption]

    /// The delay a vault uses when it names none.
    public static let defaultKitReplacementDelay: Int64 = 72 * 3600

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

        public init(kitID: String, signingKey: Data, wrapRecipient: String) {
            self.kitID = kitID
            self.signingKey = signingKey
            self.wrapRecipient = wrapRecipient
        }
    }

    public struct Epoch: Codable, Sendable, Equatable {
        public var number: Int
        public var startedIn: UInt64
        /// Why it started: "created", "removed", "handoff", "takeover", "kit", or "reencrypt" (Re-encrypt
        /// Everything: the epoch every note is re-encrypted under).
        public var reason: String
        /// The epoch's vault recipient: every note of this epoch is encrypted to it, once.
        public var recipient: String
        /// The epoch's vault identity, as an armored age file to each holder (device id, or "recovery").
        public var wraps: [String: String]

        enum CodingKeys: String, CodingKey {
            case number, startedIn = "started_in", reason, recipient, wraps
        }
    }

    /// The end of an epoch: its identity sealed to the next epoch, and the record of the note files that
    /// existed then (the guide: "a record keeps the old key and lists the files that existed").
    ///
    /// The list itself is `records/epoch-<n>.json` beside vault.json (``EpochFileList``), committed to by
    /// its SHA-256 and count here, so vault.json stays small however many notes there are. A vault made
    /// by sempere 0.1 (`sempere-vault-v1`) carries the list inline in `notes` instead; both are read.
    public struct Record: Codable, Sendable, Equatable {
        public var epoch: Int
        /// That epoch's vault identity, as an armored age file to the next epoch's recipient.
        public var sealedIdentity: String
        /// v1 only: the notes that existed when the epoch ended.
        public var notes: [NoteReference]?
        /// SHA-256 of the bytes of records/epoch-<n>.json, lower-case hex.
        public var notesSHA256: String?
        /// How many notes that list holds.
        public var notesCount: Int?

        enum CodingKeys: String, CodingKey {
            case epoch, sealedIdentity = "sealed_identity", notes, notesSHA256 = "notes_sha256"
            case notesCount = "notes_count"
        }
    }

    /// Home hands its role to another listed device (Make Home), signed by the home that hands it over:
    /// a device that follows the old home follows the new one only through such a record, and a device
    /// that missed the handoff's vault.json finds it in every later one.
    public struct Handoff: Codable, Sendable, Equatable {
        /// The generation of the body in which the new home took over.
        public var generation: UInt64
        public var from: String
        public var to: String
        /// The new home's signing key (as listed).
        public var toSigningKey: Data
        /// The old home's HybridSignature over ``signedBytes(vaultID:)``, context "sempere/v1/handoff".
        public var signature: Data

        enum CodingKeys: String, CodingKey {
            case generation, from, to, toSigningKey = "to_signing_key", signature
        }

        public init(generation: UInt64, from: String, to: String, toSigningKey: Data, signature: Data) {
            self.generation = generation
            self.from = from
            self.to = to
            self.toSigningKey = toSigningKey
            self.signature = signature
        }

        static let context = Data("sempere/v1/handoff".utf8)

        func signedBytes(vaultID: String) -> Data {
            Data(vaultID.utf8) + Data([0]) + Data(String(generation).utf8) + Data([0]) + Data(from.utf8) + Data([0])
                + Data(to.utf8) + Data([0]) + toSigningKey
        }
    }

    /// A takeover with the recovery kit (the guide: "the recovery key and the new home sign the new list
    /// together"): both sign this record, which names the new home and the devices kept. Every later
    /// vault.json carries it, so a device that missed the takeover's own vault.json still follows it.
    public struct Takeover: Codable, Sendable, Equatable {
        /// The body's `takeover_generation` from this takeover on (one more than before it).
        public var takeoverGeneration: UInt64
        /// The generation of the body the takeover made.
        public var generation: UInt64
        public var home: String
        public var homeSigningKey: Data
        /// The ids of the devices kept listed, sorted (the new home among them).
        public var kept: [String]
        /// The recovery signing key that signed, and its signature; then the new home's.
        public var kitSigningKey: Data
        public var kitSignature: Data
        public var homeSignature: Data

        enum CodingKeys: String, CodingKey {
            case takeoverGeneration = "takeover_generation", generation, home, homeSigningKey = "home_signing_key"
            case kept, kitSigningKey = "kit_signing_key", kitSignature = "kit_signature"
            case homeSignature = "home_signature"
        }

        public init(
            takeoverGeneration: UInt64, generation: UInt64, home: String, homeSigningKey: Data, kept: [String],
            kitSigningKey: Data, kitSignature: Data = Data(), homeSignature: Data = Data()
        ) {
            self.takeoverGeneration = takeoverGeneration
            self.generation = generation
            self.home = home
            self.homeSigningKey = homeSigningKey
            self.kept = kept
            self.kitSigningKey = kitSigningKey
            self.kitSignature = kitSignature
            self.homeSignature = homeSignature
        }

        static let context = Data("sempere/v1/takeover".utf8)

        /// What both keys sign.
        public func signedBytes(vaultID: String) -> Data {
            var bytes = Data(vaultID.utf8) + Data([0]) + Data(String(takeoverGeneration).utf8) + Data([0])
            bytes += Data(String(generation).utf8) + Data([0]) + Data(home.utf8) + Data([0]) + homeSigningKey
            bytes += Data([0]) + Data(kept.joined(separator: ",").utf8) + Data([0]) + kitSigningKey
            return bytes
        }
    }

    /// The first home, signed by the recovery kit when the vault was made: what lets a device that holds
    /// nothing but the kit check the whole chain of homes (handoffs and takeovers) up to today's.
    public struct Genesis: Codable, Sendable, Equatable {
        public var home: String
        public var homeSigningKey: Data
        public var kitSignature: Data

        enum CodingKeys: String, CodingKey {
            case home, homeSigningKey = "home_signing_key", kitSignature = "kit_signature"
        }

        static let context = Data("sempere/v1/genesis".utf8)

        func signedBytes(vaultID: String) -> Data {
            Data(vaultID.utf8) + Data([0]) + Data(home.utf8) + Data([0]) + homeSigningKey
        }
    }

    /// A replacement of the recovery kit that home asked for alone: it takes effect at `effectiveAt`, after
    /// the vault's delay, and until then both kits hold a wrap of the current epoch and the old kit can
    /// still take over, which cancels it (docs/sempere-format.md, "Replacing the kit").
    public struct KitReplacement: Codable, Sendable, Equatable {
        public var recovery: Recovery
        public var requestedIn: UInt64
        /// Seconds since 1970 (UTC), by home's clock; devices count the delay by their own clocks too.
        public var effectiveAt: Int64
        /// The new kit's signature of the home that asked (``KitChange/anchorBytes``).
        public var newKitSignature: Data
        /// True when home asked for Re-encrypt Everything: the epoch the replacement starts is the one every
        /// note is re-encrypted under (absent otherwise).
        public var reencrypt: Bool?

        enum CodingKeys: String, CodingKey {
            case recovery, requestedIn = "requested_in", effectiveAt = "effective_at"
            case newKitSignature = "new_kit_signature", reencrypt
        }
    }

    /// Re-encrypt Everything, finished: home re-encrypted every note of the epochs before `epoch` under
    /// `epoch`'s key, as copies beside their authors' files (`reencrypted/<author>/<id>.age`), and
    /// `records/reencrypted-<epoch>.json` lists each: the author's path, the SHA-256 of the file it copied
    /// and of the copy. vault.json commits to that list by its SHA-256 and count.
    public struct Reencryption: Codable, Sendable, Equatable {
        public var epoch: Int
        /// The generation of the body that finished it.
        public var generation: UInt64
        public var listSHA256: String
        public var count: Int

        enum CodingKeys: String, CodingKey {
            case epoch, generation, listSHA256 = "list_sha256", count
        }
    }

    /// A kit that replaced the one before: `oldKitSignature` is the old kit's signature over the new kit's
    /// signing key when the replacement was co-signed by it (immediate), else empty (it went through the
    /// delay).
    public struct KitChange: Codable, Sendable, Equatable {
        public var generation: UInt64
        public var kitSigningKey: Data
        public var oldKitSignature: Data
        /// The new kit vouches for the home that made it, at `anchorGeneration` (so a device with nothing
        /// but the new kit can check the chain of homes from there): signature over ``anchorBytes``.
        public var anchorGeneration: UInt64
        public var anchorHome: String
        public var anchorHomeSigningKey: Data
        public var newKitSignature: Data

        enum CodingKeys: String, CodingKey {
            case generation, kitSigningKey = "kit_signing_key", oldKitSignature = "old_kit_signature"
            case anchorGeneration = "anchor_generation", anchorHome = "anchor_home"
            case anchorHomeSigningKey = "anchor_home_signing_key", newKitSignature = "new_kit_signature"
        }

        static let context = Data("sempere/v1/kit-change".utf8)
        static let anchorContext = Data("sempere/v1/kit-anchor".utf8)

        static func signedBytes(vaultID: String, newKey: Data) -> Data { Data(vaultID.utf8) + Data([0]) + newKey }

        static func anchorBytes(vaultID: String, generation: UInt64, home: String, homeKey: Data) -> Data {
            Data(vaultID.utf8) + Data([0]) + Data(String(generation).utf8) + Data([0]) + Data(home.utf8) + Data([0])
                + homeKey
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
        case devices, removed, recovery, epochs, records, handoffs
        case takeoverGeneration = "takeover_generation", takeovers, genesis
        case kitReplacement = "kit_replacement", kitReplacementDelay = "kit_replacement_delay"
        case kitChanges = "kit_changes", reencryptions
    }

    init(
        vaultID: String, generation: UInt64, home: String, homeGeneration: UInt64, postQuantum: Bool,
        devices: [Device], removed: [Removal], recovery: Recovery, epochs: [Epoch], records: [Record],
        handoffs: [Handoff] = [], takeoverGeneration: UInt64 = 0, takeovers: [Takeover] = [], genesis: Genesis? = nil,
        kitReplacement: KitReplacement? = nil, kitReplacementDelay: Int64 = VaultBody.defaultKitReplacementDelay,
        kitChanges: [KitChange] = [], reencryptions: [Reencryption] = []
    ) {
        self.vaultID = vaultID
        self.generation = generation
        self.home = home
        self.homeGeneration = homeGeneration
        self.postQuantum = postQuantum
        self.devices = devices
        self.removed = removed
        self.recovery = recovery
        self.epochs = epochs
        self.records = records
        self.handoffs = handoffs
        self.takeoverGeneration = takeoverGeneration
        self.takeovers = takeovers
        self.genesis = genesis
        self.kitReplacement = kitReplacement
        self.kitReplacementDelay = kitReplacementDelay
        self.kitChanges = kitChanges
        self.reencryptions = reencryptions
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            vaultID: try container.decode(String.self, forKey: .vaultID),
            generation: try container.decode(UInt64.self, forKey: .generation),
            home: try container.decode(String.self, forKey: .home),
            homeGeneration: try container.decode(UInt64.self, forKey: .homeGeneration),
            postQuantum: try container.decode(Bool.self, forKey: .postQuantum),
            devices: try container.decode([Device].self, forKey: .devices),
            removed: try container.decode([Removal].self, forKey: .removed),
            recovery: try container.decode(Recovery.self, forKey: .recovery),
            epochs: try container.decode([Epoch].self, forKey: .epochs),
            records: try container.decode([Record].self, forKey: .records),
            // Absent in a v1 body.
            handoffs: try container.decodeIfPresent([Handoff].self, forKey: .handoffs) ?? [],
            takeoverGeneration: try container.decodeIfPresent(UInt64.self, forKey: .takeoverGeneration) ?? 0,
            takeovers: try container.decodeIfPresent([Takeover].self, forKey: .takeovers) ?? [],
            genesis: try container.decodeIfPresent(Genesis.self, forKey: .genesis),
            kitReplacement: try container.decodeIfPresent(KitReplacement.self, forKey: .kitReplacement),
            kitReplacementDelay: try container.decodeIfPresent(Int64.self, forKey: .kitReplacementDelay)
                ?? VaultBody.defaultKitReplacementDelay,
            kitChanges: try container.decodeIfPresent([KitChange].self, forKey: .kitChanges) ?? [],
            reencryptions: try container.decodeIfPresent([Reencryption].self, forKey: .reencryptions) ?? [])
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
