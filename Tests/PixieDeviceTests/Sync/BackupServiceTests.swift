import Foundation
import PixieDevice
import SiblingsCrypto
import Testing

@Suite("BackupService: the snapshot (exportRawPayload, importRawPayload) and the .pixie-archive")
struct BackupServiceTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("backup-\(UUID().uuidString)")

    func home(_ name: String) throws -> DeviceHome { try DeviceHome(directory: root.appendingPathComponent(name)) }

    /// A store with rows of every category, a changed row, tombstones (a deleted conversation takes its message
    /// with it) and a provider API key.
    func populated(_ home: DeviceHome) throws -> DeviceStore {
        let store = try DeviceStore(home: home)
        try store.put(.conversations, id: "family", fields: ["title": .text("Family"), "created_at": .integer(1)])
        try store.put(.conversations, id: "old", fields: ["title": .text("Old"), "created_at": .integer(2)])
        for index in 0..<5 {
            try store.put(
                .messages, id: "m\(index)",
                fields: [
                    "conversation_id": .text(index < 4 ? "family" : "old"), "sender": .text("ada"),
                    "body": .text("message \(index) — ünïcode"), "sent_at": .integer(Int64(-index)),
                ])
        }
        try store.delete(.conversations, id: "old")
        try store.put(
            .contacts, id: "ada",
            fields: [
                "display_name": .text("Ada"), "pubkey": .blob(SecureRandom.bytes(count: 32)),
                "user_id_hash": .blob(SecureRandom.bytes(count: 32)),
                "account_signing_pubkey": .blob(SecureRandom.bytes(count: 1984)),
                "channel_key": .blob(SecureRandom.bytes(count: 32)),
            ])
        try store.put(.memoryEvents, fields: ["kind": .text("fact"), "body": .text(""), "occurred_at": .integer(.min)])
        try store.put(.notebookNotes, id: "n1", fields: ["title": .text("Groceries"), "body": .text("milk")])
        try store.put(.notebookNotes, id: "n1", fields: ["title": .text("Groceries"), "body": .text("milk, eggs")])
        try store.put(
            .sagaChapters,
            fields: ["saga_id": .text("s"), "number": .integer(1), "title": .text("I"), "body": .text("x")])
        try store.put(.plans, id: "plan-7", fields: ["title": .text("Trip"), "body": .text("pack")])
        try store.put(.providerAPIKeys, id: "openai", fields: ["provider": .text("openai"), "api_key": .text("sk-1")])
        return store
    }

    func everyRow(_ store: DeviceStore, secrets: Bool = true) throws -> [StoreRow] {
        try StoreCategory.allCases.filter { secrets || !$0.isSecret }.flatMap {
            try store.rows($0, includingDeleted: true)
        }
    }

    func snapshot(_ store: DeviceStore, includeSecrets: Bool) throws -> Data {
        var bytes = Data()
        try BackupService(store: store).exportRawPayload(includeSecrets: includeSecrets) { bytes += $0 }
        return bytes
    }

    @discardableResult
    func importing(_ bytes: Data, into store: DeviceStore, pieceSize: Int = 97) throws -> BackupService.ImportSummary {
        let bytes = Data(bytes)
        return try BackupService(store: store).importRawPayload { feed in
            var offset = 0
            while offset < bytes.count {
                try feed(bytes[offset..<min(bytes.count, offset + pieceSize)])
                offset += pieceSize
            }
        }
    }

    @Test("every row of every category, versions and tombstones included, arrives; importing again is a no-op")
    func roundTrip() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let source = try populated(try home("a"))
        let bytes = try snapshot(source, includeSecrets: true)
        #expect(bytes.starts(with: Data("pixie/snapshot/v1".utf8)) && bytes[17] == 2 && bytes[18] == 1)
        let target = try DeviceStore(home: try home("b"))
        let rows = try everyRow(source)
        let first = try importing(bytes, into: target)
        #expect(first.rows == rows.count && first.inserted == rows.count && first.present == 0)
        #expect(try everyRow(target) == rows)
        #expect(try target.row(.notebookNotes, id: "n1")?.version == source.row(.notebookNotes, id: "n1")?.version)
        #expect(try target.row(.messages, id: "m4")?.isDeleted == true)
        #expect(try target.row(.providerAPIKeys, id: "openai")?["api_key"] == .text("sk-1"))
        let again = try importing(bytes, into: target, pieceSize: bytes.count)
        #expect(again.rows == rows.count && again.inserted == 0 && again.present == rows.count)
        #expect(try everyRow(target) == rows)
    }

    @Test("without secrets, no provider API key is in the bytes at all")
    func noSecrets() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let source = try populated(try home("a"))
        let bytes = try snapshot(source, includeSecrets: false)
        #expect(bytes[18] == 0)
        #expect(bytes.range(of: Data("sk-1".utf8)) == nil && bytes.range(of: Data("openai".utf8)) == nil)
        let target = try DeviceStore(home: try home("b"))
        try importing(bytes, into: target)
        #expect(try target.rows(.providerAPIKeys, includingDeleted: true).isEmpty)
        #expect(try everyRow(target, secrets: false) == everyRow(source, secrets: false))
    }

    @Test("insert-if-absent: a row this store has, by id (plan_id for plans), is kept as it is")
    func insertIfAbsent() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let source = try populated(try home("a"))
        let target = try DeviceStore(home: try home("b"))
        let mine = try target.put(.plans, id: "plan-7", fields: ["title": .text("Mine"), "body": .text("")])
        try target.put(.notebookNotes, id: "n1", fields: ["title": .text("Local"), "body": .text("kept")])
        try target.delete(.notebookNotes, id: "n1")
        let summary = try importing(try snapshot(source, includeSecrets: true), into: target)
        #expect(summary.present == 2 && summary.inserted == summary.rows - 2)
        #expect(try target.row(.plans, id: "plan-7") == mine)
        #expect(try target.row(.notebookNotes, id: "n1")?.isDeleted == true)
    }

    @Test("a snapshot cut anywhere, or a source that fails part way, imports nothing")
    func nothingUnlessWhole() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let bytes = try snapshot(try populated(try home("a")), includeSecrets: true)
        let target = try DeviceStore(home: try home("b"))
        for cut in [0, 5, 19, 40, bytes.count / 2, bytes.count - 13, bytes.count - 1] {
            #expect(throws: BackupServiceError.self) { try importing(bytes.prefix(cut), into: target) }
        }
        struct Broke: Error {}
        #expect(throws: Broke.self) {
            try BackupService(store: target).importRawPayload { feed in
                try feed(bytes.prefix(bytes.count - 20))
                throw Broke()
            }
        }
        #expect(try everyRow(target).isEmpty)
        // Bytes after the end record, a newer schema, an unknown record code: refused, with the reason.
        #expect(throws: BackupServiceError.self) { try importing(bytes + Data([0]), into: target) }
        var newer = bytes
        newer[17] = 3
        #expect {
            try importing(newer, into: target)
        } throws: { error in
            (error as? BackupServiceError)?.description.contains("update pixie") == true
        }
        var unknown = bytes
        unknown[19] = 42
        #expect(throws: BackupServiceError.self) { try importing(unknown, into: target) }
        #expect(try everyRow(target).isEmpty)
    }

    @Test("a schema 1 snapshot (an archive made before versions) is read: counters as readings, the migrated author")
    func schemaOne() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        // The fuzz finding of 2026-12-07: an empty schema 1 snapshot, header and end record only.
        let empty = Data("pixie/snapshot/v1".utf8) + [1, 0] + [0, 0, 0, 0, 8] + Data(count: 8)
        let target = try DeviceStore(home: try home("b"))
        #expect(try importing(empty, into: target).rows == 0)
        // One note at counter 3, as a schema 1 archive wrote it.
        var record = Data([0, 2]) + Data("n1".utf8) + [0, 0, 0, 0, 0, 0, 0, 3] + [0]
        for text in ["title", "body"] {
            let bytes = Data(text.utf8)
            record += Data([1, 0, 0, 0, UInt8(bytes.count)]) + bytes
        }
        var one = Data("pixie/snapshot/v1".utf8) + Data([1, 0, 5, 0, 0, 0, UInt8(record.count)])
        one += record
        one += Data([0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect(try importing(one, into: target).rows == 1)
        let row = try #require(try target.row(.notebookNotes, id: "n1"))
        #expect(row.version.hlc == 3 && row.version.author.rawValue == 0 && row["body"] == .text("body"))
    }

    @Test("a secret in a snapshot whose header says it has none is refused")
    func secretWithoutTheFlag() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var bytes = try snapshot(try populated(try home("a")), includeSecrets: true)
        bytes[18] = 0
        let target = try DeviceStore(home: try home("b"))
        #expect(throws: BackupServiceError.self) { try importing(bytes, into: target) }
        #expect(try everyRow(target).isEmpty)
    }

    @Test("the export is one photograph: a row written while it runs is not in it, and the write is not blocked")
    func photograph() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try DeviceStore(home: try home("a"))
        let title = String(repeating: "t", count: 1000)
        for index in 0..<1500 {
            try store.put(.conversations, id: "c\(index)", fields: ["title": .text(title), "created_at": .integer(1)])
        }
        var bytes = Data()
        var wrote = false
        try BackupService(store: store).exportRawPayload(includeSecrets: false) { piece in
            bytes += piece
            if !wrote {
                // The first MiB is out, the conversations are not finished, the plans not begun.
                try store.put(.plans, id: "late", fields: ["title": .text("Late"), "body": .text("")])
                wrote = true
            }
        }
        #expect(wrote)
        #expect(try store.row(.plans, id: "late") != nil)
        let target = try DeviceStore(home: try home("b"))
        #expect(try importing(bytes, into: target, pieceSize: 1 << 16).rows == 1500)
        #expect(try target.row(.plans, id: "late") == nil)
    }

    @Test("an archive opens only with its BackupKey: missingBackupKey says how to bring it, then it imports")
    func archive() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let (homeA, homeB) = (try home("a"), try home("b"))
        let source = try populated(homeA)
        let file = root.appendingPathComponent("store.pixie-archive")
        let summary = try BackupService(store: source).exportArchive(to: file, keyring: BackupKeyring(home: homeA))
        let bytes = try Data(contentsOf: file)
        #expect(UInt64(bytes.count) == summary.bytes)
        #expect(bytes.starts(with: Data("pixie/archive/v1".utf8)))
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        let target = try DeviceStore(home: homeB)
        let keyringB = BackupKeyring(home: homeB)
        #expect {
            try BackupService(store: target).importArchive(from: file, keyring: keyringB)
        } throws: { error in
            guard case .missingBackupKey(let reason) = error as? BackupServiceError else { return false }
            return reason.contains(summary.keyID) && reason.contains("pixie backup-key import")
        }
        // The key moves as a file.
        let keyFile = root.appendingPathComponent("backup.key")
        let exported = try BackupKeyring(home: homeA).exportKey(to: keyFile)
        #expect(exported.id == summary.keyID)
        #expect(try keyringB.importKey(from: keyFile).added)
        #expect(try !keyringB.importKey(from: keyFile).added)
        let imported = try BackupService(store: target).importArchive(from: file, keyring: keyringB)
        #expect(imported.rows == summary.rows && imported.inserted == summary.rows)
        // Never a secret in a file.
        #expect(try target.rows(.providerAPIKeys, includingDeleted: true).isEmpty)
        #expect(try everyRow(target, secrets: false) == everyRow(source, secrets: false))
        // B's own key is its own: its archives are sealed under it, not under A's.
        #expect(try keyringB.ownKey().id != summary.keyID)
    }

    @Test("a tampered archive imports nothing; an export never replaces a file")
    func archiveTampering() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let homeA = try home("a")
        let source = try populated(homeA)
        let keyring = BackupKeyring(home: homeA)
        let file = root.appendingPathComponent("store.pixie-archive")
        try BackupService(store: source).exportArchive(to: file, keyring: keyring)
        let bytes = try Data(contentsOf: file)
        let target = try DeviceStore(home: try home("b"))
        let keyringB = BackupKeyring(home: try home("b"))
        let keyFile = root.appendingPathComponent("k")
        try keyring.exportKey(to: keyFile)
        try keyringB.importKey(from: keyFile)
        for index in [20, 30, 90, 100, bytes.count - 1] {
            var altered = bytes
            altered[index] ^= 1
            let copy = root.appendingPathComponent("altered-\(index)")
            try altered.write(to: copy)
            #expect(throws: BackupServiceError.self) {
                try BackupService(store: target).importArchive(from: copy, keyring: keyringB)
            }
        }
        let cut = root.appendingPathComponent("cut")
        try bytes.dropLast(1).write(to: cut)
        #expect(throws: BackupServiceError.self) {
            try BackupService(store: target).importArchive(from: cut, keyring: keyringB)
        }
        #expect(try everyRow(target).isEmpty)

        #expect(throws: BackupServiceError.self) {
            try BackupService(store: source).exportArchive(to: file, keyring: keyring)
        }
        #expect(try Data(contentsOf: file) == bytes)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: root.path).filter { $0.contains("partial") }
        #expect(leftovers.isEmpty)
    }

    @Test("a key file that is not one is refused with what it should be")
    func badKeyFile() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let keyring = BackupKeyring(home: try home("a"))
        let file = root.appendingPathComponent("not-a-key")
        try Data("hello\n".utf8).write(to: file)
        chmod(file.path, 0o600)
        #expect {
            try keyring.importKey(from: file)
        } throws: { error in
            (error as? BackupServiceError)?.description.contains("pixie backup-key export") == true
        }
        #expect(try keyring.keys.isEmpty)
    }
}
