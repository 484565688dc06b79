import Foundation
import SiblingsCrypto

/// A device's signed list of its own notes and their versions, and of the notes it deleted:
/// `manifests/<device_id>.json`, written only by that device after every note it writes and before every
/// note it deletes (docs/sempere-format.md, "Versions and manifests").
///
/// What it answers: a note file whose signed version is older than its author's manifest says is either
/// on its way (sync tools often deliver the manifest first: "pending") or an old version the storage
/// provider put back ("set aside", when this device has already shown a newer one); a note its author
/// deleted that is there again was put back. Each manifest carries a sequence number that grows with every
/// write, and a device keeps the newest one it accepted from each author, so an older manifest cannot
/// hide a newer note.
///
/// The file is `{"body": "<JSON string>", "format": "sempere-manifest-v1", "signature": "<base64>"}`; the
/// signature is the author's HybridSignature over the body's exact bytes, context "sempere/v1/manifest".
/// The body, written canonically (sorted keys, no whitespace, ids sorted):
///
///     {"deleted":{"<note id>":3},"device":"<id>","notes":{"<note id>":2},"sequence":7,"vault_id":"…"}
///
/// A deletion that also ends other devices' files of the note (this device deleted a note another device wrote
/// or edited) names them, by device id and version, in `replaced`, present only when not empty:
///
///     {"deleted":{…},"device":"<id>","notes":{…},"replaced":{"<note id>":{"<device id>":4}},"sequence":8,…}
public struct NoteManifest: Sendable, Equatable {
    public static let format = "sempere-manifest-v1"
    static let context = Data("sempere/v1/manifest".utf8)

    public let vaultID: String
    public let device: String
    public private(set) var sequence: UInt64
    /// Note id → the version of the note file written last.
    public private(set) var notes: [String: Int]
    /// Note id → the version of this device's own file of it that was deleted (0: it had none).
    public private(set) var deleted: [String: Int]
    /// Note id (one in ``deleted``) → the other devices' files of it the deletion ended: device id → version.
    public private(set) var replaced: [String: [String: Int]]

    struct Body: Codable {
        var vaultID: String
        var device: String
        var sequence: UInt64
        var notes: [String: Int]
        var deleted: [String: Int]
        var replaced: [String: [String: Int]]?

        enum CodingKeys: String, CodingKey {
            case vaultID = "vault_id", device, sequence, notes, deleted, replaced
        }
    }

    struct File: Codable {
        var format: String
        var body: String
        var signature: Data
    }

    /// An empty manifest (sequence 0) of `device`.
    public init(vaultID: String, device: String) {
        self.vaultID = vaultID
        self.device = device
        sequence = 0
        notes = [:]
        deleted = [:]
        replaced = [:]
    }

    /// The manifest's path in the vault folder.
    public static func path(device: String) -> String { "manifests/\(device).json" }

    /// Records that note `id` is now at `version`.
    mutating func recordWrite(_ id: String, version: Int) {
        notes[id] = version
        deleted[id] = nil
        replaced[id] = nil
        sequence += 1
    }

    /// Records that this device's file of note `id`, at `version` (0: none), is deleted, and with it the other
    /// devices' files of the note in `replacing` (device id → version).
    ///
    /// What a device's deletions replace only grows: a later deletion of the same note keeps the higher of each
    /// device's version, and never records a lower version of its own.
    mutating func recordDeletion(_ id: String, version: Int, replacing: [String: Int] = [:]) {
        notes[id] = nil
        deleted[id] = max(deleted[id] ?? 0, version)
        var others = replaced[id] ?? [:]
        for (device, version) in replacing where device != self.device {
            others[device] = max(others[device] ?? 0, version)
        }
        replaced[id] = others.isEmpty ? nil : others
        sequence += 1
    }

    /// Moves the sequence on past `other` (the sequence of a manifest the device kept, or one in the folder),
    /// when it is not already: what it writes next is newer than both.
    mutating func advance(past other: UInt64) {
        sequence = max(sequence, other + 1)
    }

    /// The body's canonical bytes. Ids are 32 hex digits (checked when parsing), so nothing needs escaping.
    func bodyBytes() -> Data {
        func object(_ map: [String: Int]) -> String {
            "{" + map.keys.sorted().map { "\"\($0)\":\(map[$0]!)" }.joined(separator: ",") + "}"
        }
        let replacedField =
            replaced.isEmpty
            ? ""
            : ",\"replaced\":{"
                + replaced.keys.sorted().map { "\"\($0)\":\(object(replaced[$0]!))" }.joined(separator: ",") + "}"
        return Data(
            ("{\"deleted\":\(object(deleted)),\"device\":\"\(device)\",\"notes\":\(object(notes))"
                + "\(replacedField),\"sequence\":\(sequence),\"vault_id\":\"\(vaultID)\"}").utf8)
    }

    /// The manifest file, signed by `keys` (this device, whose manifest it is).
    func signed(by keys: DeviceKeys) throws -> Data {
        precondition(keys.id == device, "a device signs only its own manifest")
        let body = bodyBytes()
        let signature = try keys.signingKey.signature(for: body, context: Self.context)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(
            File(
                format: Self.format, body: String(decoding: body, as: UTF8.self), signature: signature.rawRepresentation
            ))
    }

    /// Parses a manifest file and checks it: the format, the vault, the device it names (`device`), and its
    /// signature under `key`, that device's signing key.
    package init(parsing data: Data, device expected: String, vaultID: String, key: HybridSignature.PublicKey) throws {
        let name = Self.path(device: expected)
        let file: File
        let body: Body
        do {
            file = try JSONDecoder().decode(File.self, from: data)
            body = try JSONDecoder().decode(Body.self, from: Data(file.body.utf8))
        } catch {
            throw SempereError(.malformedVault, "\(name) does not parse: \(plainDescription(of: error))")
        }
        guard file.format == Self.format else {
            throw SempereError(
                .malformedVault, "\(name) is format \"\(file.format)\": update sempere on this device to read it")
        }
        guard body.vaultID == vaultID, body.device == expected else {
            throw SempereError(.malformedVault, "\(name) is another vault's or another device's manifest")
        }
        let hex = { (id: String) in VaultFolder.isHexID(Substring(id)) }
        let replaced = body.replaced ?? [:]
        guard body.replaced.map({ !$0.isEmpty }) ?? true, body.notes.keys.allSatisfy(hex),
            body.deleted.keys.allSatisfy(hex),
            body.notes.values.allSatisfy({ $0 >= 0 }), body.deleted.values.allSatisfy({ $0 >= 0 }),
            replaced.allSatisfy({ id, devices in
                body.deleted[id] != nil && !devices.isEmpty && devices.keys.allSatisfy(hex)
                    && devices[expected] == nil && devices.values.allSatisfy { $0 >= 0 }
            })
        else {
            throw SempereError(.malformedVault, "\(name) names a note id or a version that is not one")
        }
        guard let signature = try? HybridSignature.Signature(rawRepresentation: file.signature),
            key.isValidSignature(signature, for: Data(file.body.utf8), context: Self.context)
        else {
            throw SempereError(.badSignature, "\(name) is not signed by its device: it was forged or altered")
        }
        self.vaultID = body.vaultID
        self.device = body.device
        self.sequence = body.sequence
        self.notes = body.notes
        self.deleted = body.deleted
        self.replaced = replaced
    }
}
