import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Testing

@Suite("DeviceStore: the seed's categories, each row versioned with a tombstone, checked against its schema")
struct DeviceStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)")

    func home() throws -> DeviceHome { try DeviceHome(directory: directory) }

    func contact(_ name: String, hash: Data, key: Data = SecureRandom.bytes(count: 32)) -> [String: StoreValue] {
        [
            "display_name": .text(name), "pubkey": .blob(SecureRandom.bytes(count: 32)), "user_id_hash": .blob(hash),
            "account_signing_pubkey": .blob(SecureRandom.bytes(count: 64)), "channel_key": .blob(key),
        ]
    }

    @Test("every category takes a row and gives it back; a change is the next version; the file survives a reopen")
    func everyCategory() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DeviceStore(home: try home())
        let samples: [StoreCategory: [String: StoreValue]] = [
            .conversations: ["title": .text("Family"), "created_at": .integer(1)],
            .contacts: contact("Ada", hash: SecureRandom.bytes(count: 32)),
            .memoryEvents: ["kind": .text("fact"), "body": .text("likes tea"), "occurred_at": .integer(2)],
            .notebookNotes: ["title": .text("Groceries"), "body": .text("milk")],
            .sagaChapters: [
                "saga_id": .text("s1"), "number": .integer(1), "title": .text("One"), "body": .text("It began"),
            ],
            .plans: ["title": .text("Trip"), "body": .text("pack")],
            .providerAPIKeys: ["provider": .text("openai"), "api_key": .text("sk-secret")],
        ]
        #expect(Set(samples.keys).union([.messages]) == Set(StoreCategory.allCases))
        var first: [StoreCategory: StoreRow] = [:]
        for (category, fields) in samples {
            let row = try store.put(category, id: "row-\(category.rawValue)", fields: fields)
            #expect(!row.isDeleted && row.version.hlc > 0)
            #expect(try store.row(category, id: row.id) == row)
            first[category] = row
        }
        let message = try store.put(
            .messages,
            fields: [
                "conversation_id": .text("row-conversations"), "sender": .text("me"), "body": .text("hi"),
                "sent_at": .integer(3),
            ])
        let changed = try store.put(
            .notebookNotes, id: "row-notebook_notes",
            fields: ["title": .text("Groceries"), "body": .text("milk, eggs")])
        #expect(changed.version > first[.notebookNotes]!.version)

        let reopened = try DeviceStore(home: try home())
        #expect(try reopened.row(.notebookNotes, id: "row-notebook_notes")?["body"] == .text("milk, eggs"))
        #expect(try reopened.rows(.messages).map(\.id) == [message.id])
        #expect(try reopened.row(.plans, id: "row-plans")?.category.idColumn == "plan_id")
        // The file holds provider API keys and channel keys: this user's alone, like device.json.
        let mode = try FileManager.default.attributesOfItem(atPath: try #require(reopened.path))[.posixPermissions]
        #expect(mode as? Int == 0o600)
    }

    @Test("a deletion is a tombstone: the next version, no content, hidden from a listing unless asked for")
    func tombstones() throws {
        let store = try DeviceStore()
        try store.put(.conversations, id: "c1", fields: ["title": .text("Work"), "created_at": .integer(1)])
        let message = try store.put(
            .messages,
            fields: [
                "conversation_id": .text("c1"), "sender": .text("me"), "body": .text("secret"), "sent_at": .integer(2),
            ])
        let note = try store.put(.notebookNotes, fields: ["title": .text("t"), "body": .text("gone soon")])
        let tombstone = try store.delete(.notebookNotes, id: note.id)
        #expect(tombstone.version > note.version && tombstone.isDeleted && tombstone.fields.isEmpty)
        #expect(try store.rows(.notebookNotes).isEmpty)
        #expect(try store.rows(.notebookNotes, includingDeleted: true) == [tombstone])
        #expect(throws: DeviceStoreError.self) { try store.delete(.notebookNotes, id: note.id) }
        #expect(throws: DeviceStoreError.self) { try store.delete(.plans, id: "never") }
        // Writing the id again brings it back, at a version after the tombstone's.
        #expect(
            try store.put(.notebookNotes, id: note.id, fields: ["title": .text("t"), "body": .text("back")]).version
                > tombstone.version)

        // A conversation's messages go with it.
        try store.delete(.conversations, id: "c1")
        #expect(try store.row(.messages, id: message.id)?.isDeleted == true)
        #expect(try store.row(.messages, id: message.id)?.fields.isEmpty == true)
    }

    @Test("fields that do not fit the schema are refused with the reason, and nothing is written")
    func schema() throws {
        let store = try DeviceStore()
        func refusal(_ category: StoreCategory, _ fields: [String: StoreValue], id: String? = nil) -> String {
            do {
                try store.put(category, id: id, fields: fields)
                return "written"
            } catch {
                return "\(error)"
            }
        }
        let note: [String: StoreValue] = ["title": .text("t"), "body": .text("b")]
        #expect(refusal(.notebookNotes, ["title": .text("t")]).contains("needs the field body"))
        #expect(refusal(.notebookNotes, note.merging(["colour": .text("red")]) { $1 }).contains("no field colour"))
        #expect(refusal(.notebookNotes, ["title": .integer(1), "body": .text("b")]).contains("is text, not integer"))
        #expect(refusal(.notebookNotes, note, id: "has space").contains("row id"))
        #expect(refusal(.notebookNotes, note, id: "").contains("row id"))
        var short = contact("Ada", hash: SecureRandom.bytes(count: 32))
        short["channel_key"] = .blob(Data(count: 16))
        #expect(refusal(.contacts, short).contains("must be 32 bytes, not 16"))
        #expect(
            refusal(
                .messages,
                [
                    "conversation_id": .text("nowhere"), "sender": .text("me"), "body": .text("b"),
                    "sent_at": .integer(1),
                ]
            ).contains("no conversation nowhere"))
        for category in StoreCategory.allCases { #expect(try store.rows(category, includingDeleted: true).isEmpty) }
    }

    @Test("a contact's channel key is found by userIDHash, and ChannelKeys checks a contact's frame under it")
    func contactsResolveChannelKeys() throws {
        let store = try DeviceStore()
        let credential = HybridSignature.PrivateKey()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let ours = SenderCert.computeUserIDHash("account-1")
        let theirs = SenderCert.computeUserIDHash("account-2")
        let channelKey = SecureRandom.bytes(count: 32)
        let row = try store.put(.contacts, fields: contact("Bo", hash: theirs, key: channelKey))
        // A second contact with the same hash would make the key ambiguous.
        #expect(throws: DeviceStoreError.self) { try store.put(.contacts, fields: contact("Bo again", hash: theirs)) }

        let inboxKey = XWing.PrivateKey()
        let inbox = RelaySubjectKey().subject
        let cert = try SenderCert(
            userIDHash: theirs, deviceKey: SecureRandom.bytes(count: 32), issuedAt: now.addingTimeInterval(-10),
            expiresAt: now.addingTimeInterval(3600), signedBy: credential)
        // Bo's device seals under the channel key both sides hold.
        let bo = try ChannelKeys(ownUserIDHash: theirs, accountSeed: nil) { _ in SymmetricKey(data: channelKey) }
        let frame = try bo.seal(
            .syncDelta, Data("hello".utf8), senderCert: cert, to: ours, recipientKey: inboxKey.publicKey,
            recipient: inbox)
        let keys = try store.channelKeys(ownUserIDHash: ours, accountSeed: SecureRandom.bytes(count: 32))
        let verifier = SenderCert.Verifier(pinnedKeys: [credential.publicKey])
        #expect(
            try keys.open(frame, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now).payload
                == Data("hello".utf8))

        // Once the contact is deleted there is no key: the frame is rejected, and a send to them throws.
        try store.delete(.contacts, id: row.id)
        #expect(throws: ChannelKeys.Failure.unknownSender) {
            try keys.open(frame, sealingKey: inboxKey, inbox: inbox, senderCerts: verifier, now: now)
        }
        #expect(throws: ChannelKeys.Failure.unknownSender) {
            try keys.seal(
                .syncDelta, Data(), senderCert: cert, to: theirs, recipientKey: inboxKey.publicKey, recipient: inbox)
        }
    }

    @Test("a file that is not a store is refused with what to do, and left as it was")
    func damagedFile() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try home()
        let file = directory.appendingPathComponent("store.sqlite")
        let junk = Data(repeating: 0x41, count: 4096)
        try junk.write(to: file)
        #expect {
            try DeviceStore(home: home)
        } throws: { error in
            "\(error)".contains("Move it away")
        }
        #expect(try Data(contentsOf: file) == junk)
    }
}
