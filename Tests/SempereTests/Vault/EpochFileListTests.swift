import Foundation
import Sempere
import Testing

/// The record of the files that existed when an epoch ended (`records/epoch-<n>.json`).
@Suite("Sempere epoch file lists")
struct EpochFileListTests {
    /// What `JSONEncoder` writes for the list (sorted keys, slashes unescaped): the bytes the direct
    /// writer must give, so the SHA-256 vault.json commits to is the same whichever wrote it.
    struct Reference: Encodable {
        let epoch: Int
        let format: String
        let notes: [VaultBody.NoteReference]
        let vaultID: String

        enum CodingKeys: String, CodingKey {
            case epoch, format, notes, vaultID = "vault_id"
        }
    }

    static func encoderBytes(vaultID: String, epoch: Int, notes: [VaultBody.NoteReference]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(
            Reference(
                epoch: epoch, format: EpochFileList.format, notes: notes.sorted { $0.path < $1.path }, vaultID: vaultID)
        )
    }

    @Test("the list is written byte for byte as JSONEncoder writes it, plain or with strings that need escaping")
    func bytesAsTheEncoderWrites() throws {
        let notes = (0..<50).map { index in
            VaultBody.NoteReference(
                path: "notes/\(String(repeating: "ab", count: 16))/\(String(format: "%032x", 977 * index)).age",
                sha256: String(format: "%064x", index))
        }
        for epoch in [1, 12, 1_000_000] {
            let list = try EpochFileList(
                vaultID: String(repeating: "0f", count: 16), epoch: epoch, notes: notes.reversed())
            #expect(
                list.bytes
                    == (try Self.encoderBytes(vaultID: String(repeating: "0f", count: 16), epoch: epoch, notes: notes)))
            #expect(list.notes.map(\.path) == notes.map(\.path).sorted())
        }
        // No notes at all.
        #expect(
            try EpochFileList(vaultID: "v", epoch: 2, notes: []).bytes
                == Self.encoderBytes(vaultID: "v", epoch: 2, notes: []))
        // Strings the direct writer does not escape go through the encoder: still the encoder's bytes.
        let odd = [VaultBody.NoteReference(path: "notes/\"quoted\"\\/é\n.age", sha256: "00")]
        #expect(
            try EpochFileList(vaultID: "v", epoch: 3, notes: odd).bytes
                == Self.encoderBytes(vaultID: "v", epoch: 3, notes: odd))
    }
}
