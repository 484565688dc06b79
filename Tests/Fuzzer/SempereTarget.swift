import Foundation
import Sempere
import SiblingsCrypto

/// What a Sempere vault's storage provider controls (docs/sempere-format.md): vault.json (the signed device list
/// and epochs, parsed before its signature is checked), its body and pin, join requests (with their
/// self-signature), the six join words and the pasted join code, a device's note manifest (checked against the
/// device and vault it names, then under a fixed key), an epoch's file list and a re-encryption's list (each
/// checked against a record made to commit to the input's own SHA-256, so the parser past that check is
/// reached), and a note's signature trailer. Every error must be a `SempereError` (or, for the bare Codable
/// bodies, a `DecodingError`).
let sempereTarget = FuzzTarget(
    name: "sempere",
    summary: "vault.json, its body and pin, join requests and words, manifests, records, note trailers (Sempere)",
    maximumLength: 65_536,
    seeds: {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-sempere-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("vault")
        var home = try VaultSession.create(
            folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil,
            configRoot: root.appendingPathComponent("home")
        ).session
        _ = try home.newNote(markdown: "# A note\n\nText.\n")
        let manifests = folder.appendingPathComponent("manifests")
        let manifest = try FileManager.default.contentsOfDirectory(atPath: manifests.path).map {
            try Data(contentsOf: manifests.appendingPathComponent($0))
        }
        let request = try VaultSession.askToJoin(
            folder: folder, name: "Phone", configRoot: root.appendingPathComponent("phone"))
        let vault = try Data(contentsOf: folder.appendingPathComponent("vault.json"))
        let signature = Data(repeating: 0x5a, count: 3373).base64EncodedString()
        let trailer = Data(
            "# A note\n\nText.\n<!-- sempere-note v2 author=0123456789abcdef epoch=1 version=3 signature=\(signature) -->\n"
                .utf8)
        let digest = String(repeating: "ab", count: 32)
        let epochFiles = try EpochFileList(
            vaultID: "0123456789abcdef", epoch: 1,
            notes: [.init(path: "notes/0011.age", sha256: digest), .init(path: "notes/00\\\"2.age", sha256: digest)])
        let reencrypted = try ReencryptionList(
            vaultID: "0123456789abcdef", epoch: 2,
            notes: [.init(path: "notes/0011.age", sha256: digest, sourceSHA256: digest)])
        return [
            vault, try request.encoded(), Data(request.words.description.utf8), Data(request.code.utf8), trailer,
            epochFiles.bytes, reencrypted.bytes,
        ] + manifest
    },
    run: { input in
        expectOnly(SempereError.self, "SignedVault(parsing:)") { _ = try SignedVault(parsing: input) }
        expectOnlySempereOrDecoding("VaultBody") { _ = try JSONDecoder().decode(VaultBody.self, from: input) }
        expectOnlySempereOrDecoding("VaultPin") { _ = try JSONDecoder().decode(VaultPin.self, from: input) }
        expectOnly(SempereError.self, "JoinRequest(parsing:)") { _ = try JoinRequest(parsing: input) }
        expectOnly(SempereError.self, "JoinWords(parsing:)") {
            _ = try JoinWords(parsing: String(decoding: input, as: UTF8.self))
        }
        expectOnly(SempereError.self, "JoinRequest.matching(code:in:)") {
            _ = try JoinRequest.matching(code: String(decoding: input, as: UTF8.self), in: [])
        }
        expectOnly(SempereError.self, "NoteManifest(parsing:)") {
            // Checked against the device and vault it names, so the fuzzer need not guess them.
            let named = try? JSONDecoder().decode(
                NamedManifest.Body.self,
                from: Data((try JSONDecoder().decode(NamedManifest.self, from: input)).body.utf8))
            _ = try NoteManifest(
                parsing: input, device: named?.device ?? "", vaultID: named?.vaultID ?? "", key: certKey.publicKey)
        }
        // The lists are read only once their SHA-256 matches vault.json's record, so the record commits to the
        // input, and names the vault, epoch and count the input claims.
        let named = try? JSONDecoder().decode(NamedList.self, from: input)
        let sha256 = SHA256.hash(data: input).description
        let (vaultID, epoch, count) = (named?.vaultID ?? "", named?.epoch ?? 1, named?.notes?.count ?? 0)
        expectOnly(SempereError.self, "EpochFileList(parsing:)") {
            let record = try JSONDecoder().decode(
                VaultBody.Record.self,
                from: Data(
                    #"{"epoch":\#(epoch),"sealed_identity":"","notes_sha256":"\#(sha256)","notes_count":\#(count)}"#
                        .utf8))
            _ = try EpochFileList(parsing: input, record: record, vaultID: vaultID)
        }
        expectOnly(SempereError.self, "ReencryptionList(parsing:)") {
            let record = try JSONDecoder().decode(
                VaultBody.Reencryption.self,
                from: Data(#"{"epoch":\#(epoch),"generation":1,"list_sha256":"\#(sha256)","count":\#(count)}"#.utf8))
            _ = try ReencryptionList(parsing: input, record: record, vaultID: vaultID)
        }
        _ = VaultNote.Trailer(input)
    })

/// The vault, epoch and number of notes a list file claims.
private struct NamedList: Decodable {
    let vaultID: String?
    let epoch: Int?
    let notes: [Ignored]?

    struct Ignored: Decodable {}

    enum CodingKeys: String, CodingKey {
        case vaultID = "vault_id", epoch, notes
    }
}

/// The device and vault a manifest file names.
private struct NamedManifest: Decodable {
    let body: String

    struct Body: Decodable {
        let device: String
        let vaultID: String

        enum CodingKeys: String, CodingKey {
            case device
            case vaultID = "vault_id"
        }
    }
}

/// Runs `body`; an error other than a `SempereError` or a `DecodingError` is a finding.
func expectOnlySempereOrDecoding(_ what: String, _ body: () throws -> Void) {
    do {
        try body()
    } catch is SempereError {
    } catch is DecodingError {
    } catch {
        finding("\(what) threw \(type(of: error)), neither a SempereError nor a DecodingError: \(error)")
    }
}
