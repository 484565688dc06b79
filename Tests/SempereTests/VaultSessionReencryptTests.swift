import Age
import Foundation
import Sempere
import Testing

/// Re-encrypt Everything, late files and Repair's "From Before a Device Change" (the guide's "Files that
/// arrive late" and "Re-encrypt Everything"; issue "Sempere, part 3"), through `VaultSession`.
@Suite("Sempere Re-encrypt Everything, late files, and what a removed device writes")
struct VaultSessionReencryptTests {
    /// Home (laptop), the phone and the tablet in one folder, a note from each, and the kit.
    struct Trio {
        let root: URL
        let folder: URL
        var home: VaultSession
        let kit: RecoveryKit

        init() throws {
            let root = try temporaryDirectory()
            let folder = root.appendingPathComponent("vault")
            let config = { (name: String) in root.appendingPathComponent(name) }
            self.root = root
            self.folder = folder
            let created = try VaultSession.create(
                folder: folder, homeName: "Laptop", postQuantum: false, passphrase: nil, configRoot: config("home"))
            home = created.session
            kit = created.kit
            try home.kitShown()
            for name in ["phone", "tablet"] {
                let request = try VaultSession.askToJoin(folder: folder, name: name, configRoot: config(name))
                let approved = try home.approve(.words(request.words.description))
                _ = try VaultSession.finishJoin(
                    folder: folder, check: .words(approved.words.description), configRoot: config(name))
            }
            for name in ["home", "phone", "tablet"] {
                try VaultSession(configRoot: config(name), folder: folder.path).newNote(
                    markdown: "# From the \(name)\n")
            }
        }

        func config(_ name: String) -> URL { root.appendingPathComponent(name) }
        func session(_ name: String, now: Date? = nil) throws -> VaultSession {
            try VaultSession(configRoot: config(name), folder: folder.path, now: now)
        }
        func remove() { try? FileManager.default.removeItem(at: root) }

        /// Every note file in the folder (the authors' and home's copies).
        func noteFiles() throws -> [String] {
            let vault = VaultFolder(url: folder)
            return try vault.notePaths() + vault.copyPaths()
        }

        /// The note files in the folder that `identity` opens.
        func opened(by identity: WrapIdentity) throws -> [String] {
            try noteFilesOpened(in: folder, by: identity)
        }

        /// The epoch identity that `name`'s device could unwrap in `epoch` (what a removed device keeps).
        func epochKey(_ name: String, epoch: Int, in body: VaultBody) throws -> WrapIdentity {
            try epochIdentity(try VaultSession.deviceKeys(configRoot: config(name)), epoch: epoch, in: body)
        }
    }

    @Test("after Re-encrypt Everything and each author's next command, no file opens with an old key; authors stay")
    func reencryptEverything() throws {
        var trio = try Trio()
        defer { trio.remove() }
        // Home removes the phone: the phone keeps epoch 1's key, which opens every note written so far.
        let phoneKey = try trio.epochKey("phone", epoch: 1, in: trio.home.body)
        try trio.home.remove(device: try trio.home.device(matching: "phone"))
        #expect(try trio.opened(by: phoneKey).count == 3)
        let before = try trio.home.list().notes.map { "\($0.author) \($0.markdown)" }.sorted()
        #expect(before.count == 3)

        var reports: [VaultSession.ReencryptProgress] = []
        let result = try trio.home.reencryptEverything(currentKit: trio.kit) { reports.append($0) }
        #expect(result.count == 3 && result.epoch == 3 && result.kit != nil && result.effectiveAt == nil)
        #expect(reports.last.map { ($0.done, $0.total) } ?? (0, 0) == (3, 3) && reports.first?.done == 0)
        try trio.home.kitShown()
        #expect(trio.home.body.recovery.signingKey != (try trio.kit.signingKey().publicKey.rawRepresentation))
        #expect(trio.home.body.reencryptions.map(\.epoch) == [3])
        // Home removed its own old file and the removed phone's; the tablet's goes on its next command.
        let tabletID = try VaultSession.deviceKeys(configRoot: trio.config("tablet")).id
        #expect(result.waitingForRemoval.count == 1 && result.waitingForRemoval[0].hasPrefix("notes/\(tabletID)/"))
        // Meanwhile every note reads as before, with its author.
        #expect(try trio.home.list().notes.map { "\($0.author) \($0.markdown)" }.sorted() == before)
        _ = try trio.session("tablet")
        #expect(try trio.home.list().waitingForRemoval.isEmpty)
        #expect(try trio.session("tablet").list().notes.map { "\($0.author) \($0.markdown)" }.sorted() == before)
        // Now neither the removed phone's key nor the old kit's opens any file of the folder.
        #expect(try trio.opened(by: phoneKey).isEmpty)
        let oldKitEpoch2 = try WrapIdentity(
            string: String(
                decoding: try Age.decrypt(
                    Data(try #require(trio.home.body.epochs.first { $0.number == 2 }?.wraps["recovery"]).utf8),
                    identities: [try trio.kit.wrapIdentity(postQuantum: false).ageIdentity]), as: UTF8.self))
        #expect(try trio.opened(by: oldKitEpoch2).isEmpty)
        #expect(try trio.noteFiles().allSatisfy { $0.hasPrefix("reencrypted/") })
        #expect(trio.home.body.currentEpoch.wraps["recovery"] != nil)

        // The tablet edits its note after the re-encryption: its file is the note again, and home removes
        // its copy, now stale.
        let tablet = try trio.session("tablet")
        let tabletNote = try #require(try tablet.list().notes.first { $0.author == tabletID })
        try tablet.updateNote(at: tabletNote.path, markdown: "# From the tablet, edited\n")
        #expect(try trio.home.list().notes.contains { $0.markdown == "# From the tablet, edited\n" })
        #expect(
            !FileManager.default.fileExists(
                atPath: trio.folder.appendingPathComponent(
                    "reencrypted/\(tabletID)/\(tabletNote.id).age"
                ).path))
    }

    @Test("a copy no re-encryption list names is set aside: a removed device cannot pass an old note off as new")
    func unboundCopy() throws {
        var trio = try Trio()
        defer { trio.remove() }
        let phone = try trio.session("phone")
        let phoneNote = try #require(try phone.list().notes.first { $0.author == phone.keys.id })
        let oldFile = try Data(contentsOf: trio.folder.appendingPathComponent(phoneNote.path))
        let phoneKey = try trio.epochKey("phone", epoch: 1, in: trio.home.body)
        try trio.home.remove(device: try trio.home.device(matching: "phone"))
        _ = try trio.home.reencryptEverything(currentKit: trio.kit)
        let copyPath = ReencryptionList.copyPath(of: phoneNote.path)
        #expect(try trio.home.list().notes.contains { $0.file == copyPath })

        // The removed phone kept the plaintext of its note, signature line and all, and the new epoch's
        // recipient is public: it encrypts that plaintext to the new key, at the copy's path and as a copy of a
        // note of its own that home never copied. Neither file is in home's list, so neither is a note.
        let plaintext = try Age.decrypt(oldFile, identities: [phoneKey.ageIdentity])
        let recipient = try #require(try AgeKeyFile.recipients(from: trio.home.body.currentEpoch.recipient).first)
        let replayed = try Age.encrypt(plaintext, to: [recipient])
        try replayed.write(to: trio.folder.appendingPathComponent(copyPath))
        let elsewhere = "reencrypted/\(phone.keys.id)/\(VaultFolder.newNoteID()).age"
        try replayed.write(to: trio.folder.appendingPathComponent(elsewhere))
        let listing = try trio.home.list()
        #expect(!listing.notes.contains { $0.author == phone.keys.id })
        #expect(Set(listing.setAside.map(\.path)) == [copyPath, elsewhere])
        #expect(listing.setAside.allSatisfy { $0.category == .untrusted && $0.reason.contains("does not name") })
    }

    @Test("a device offline during a change writes under the old key, then re-encrypts those notes once it sees it")
    func lateFiles() throws {
        var trio = try Trio()
        defer { trio.remove() }
        // The phone's session is from before the change: it has not seen the tablet's removal.
        let stalePhone = try trio.session("phone")
        let tabletKey = try trio.epochKey("tablet", epoch: 1, in: trio.home.body)
        try trio.home.remove(device: try trio.home.device(matching: "tablet"))
        let late = try stalePhone.newNote(markdown: "# Written offline\n")
        // Accepted (a listed device's note, late), and still under epoch 1's key, which the tablet holds.
        #expect(try trio.home.list().notes.contains { $0.path == late && $0.keyEpoch == 1 })
        #expect(try trio.opened(by: tabletKey).contains(late))

        // The phone's next command sees the change and writes it again under the new key.
        let phone = try trio.session("phone")
        let note = try #require(try trio.home.list().notes.first { $0.path == late })
        #expect(note.keyEpoch == 2 && note.version == 2 && note.markdown == "# Written offline\n")
        #expect(note.author == phone.keys.id)
        #expect(!(try trio.opened(by: tabletKey).contains(late)))
        // The notes that existed at the removal are old files: they stay as they are.
        #expect(try trio.home.list().notes.filter { $0.keyEpoch == 1 }.count == 3)
    }

    @Test("a removed device's late writes are set aside (From Before a Device Change); Repair restores or deletes")
    func removedDeviceWritesLate() throws {
        var trio = try Trio()
        defer { trio.remove() }
        let staleTablet = try trio.session("tablet")
        try trio.home.remove(device: try trio.home.device(matching: "tablet"))
        let late = try staleTablet.newNote(markdown: "# After my removal\n")
        let listing = try trio.home.list()
        #expect(!listing.notes.contains { $0.path == late })
        let entry = try #require(listing.setAside.first { $0.path == late })
        #expect(entry.category == .fromBeforeADeviceChange && entry.category.title == "From Before a Device Change")

        // Restored on home: its text becomes a note of home's; the file, in a removed device's folder, goes.
        let restored = try trio.home.repairRestore(try trio.home.setAsideEntry(VaultSession.noteID(late)))
        #expect(restored.removedSetAside)
        let note = try #require(try trio.home.list().notes.first { $0.path == restored.path })
        #expect(note.author == trio.home.keys.id && note.markdown == "# After my removal\n")
        #expect(!FileManager.default.fileExists(atPath: trio.folder.appendingPathComponent(late).path))

        // Another late write is deleted instead.
        let other = try staleTablet.newNote(markdown: "# And another\n")
        try trio.home.repairDelete(try trio.home.setAsideEntry(other))
        #expect(try trio.home.list().setAside.isEmpty)
    }

    @Test("Re-encrypt Everything by home alone waits the kit's delay, then runs when asked again")
    func delayed() throws {
        var trio = try Trio()
        defer { trio.remove() }
        let waiting = try trio.home.reencryptEverything(currentKit: nil)
        #expect(waiting.effectiveAt != nil && waiting.epoch == nil && waiting.count == 0)
        #expect(trio.home.body.kitReplacement?.reencrypt == true && trio.home.body.currentEpoch.number == 1)
        try trio.home.kitShown()
        // Asked again before the delay: nothing more happens.
        #expect(try trio.home.reencryptEverything(currentKit: nil).effectiveAt == waiting.effectiveAt)
        let later = try #require(waiting.effectiveAt).addingTimeInterval(60)
        var home = try trio.session("home", now: later)
        #expect(home.body.currentEpoch.reason == "reencrypt" && home.body.kitReplacement == nil)
        // A run that stopped mid-write left half a copy of the tablet's note where the copy goes (copies are
        // written in place when nothing is there). While the re-encryption is under way, the tablet lists it as
        // pending, not set aside; the tablet's own file is still the note.
        let tablet = try trio.session("tablet", now: later)
        let tabletNote = try #require(try tablet.list().notes.first { $0.author == tablet.keys.id })
        let copyPath = ReencryptionList.copyPath(of: tabletNote.path)
        let whole = try Data(contentsOf: trio.folder.appendingPathComponent(tabletNote.path))
        try FileManager.default.createDirectory(
            at: trio.folder.appendingPathComponent(copyPath).deletingLastPathComponent(),
            withIntermediateDirectories: true)
        try whole.prefix(whole.count / 2).write(to: trio.folder.appendingPathComponent(copyPath))
        let during = try tablet.list()
        #expect(during.setAside.isEmpty && during.notes.count == 3)
        #expect(during.pending.map(\.path) == [copyPath])
        // Home goes on: the half copy is replaced (through a staged name, as any file already there is), and
        // the whole copy is the note.
        let done = try home.reencryptEverything(currentKit: nil)
        #expect(done.count == 3 && done.epoch == 2 && done.kit == nil)
        #expect(home.body.reencryptions.map(\.epoch) == [2])
        let after = try trio.session("tablet", now: later).list()
        #expect(after.setAside.isEmpty && after.pending.isEmpty)
        #expect(after.notes.first { $0.author == tablet.keys.id }?.file == copyPath)
        // The old kit's wrap is gone from the epoch every note is now under.
        let oldKitKey = try trio.kit.wrapIdentity(postQuantum: false).recipientString
        #expect(home.body.recovery.wrapRecipient != oldKitKey)
    }
}
