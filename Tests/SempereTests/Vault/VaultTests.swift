import Age
import Foundation
import Processes
import Sempere
import SiblingsCrypto
import Testing

/// The vault model of docs/sempere-format.md against the guide's points (001_5891a016d14320f1.txt) and
/// the provider's attacks. Each device is a `DeviceKeys` and a `VaultPin`; "the provider" is
/// whoever hands a device vault.json and note bytes.
@Suite("Sempere vault: device list, epochs, wraps, notes")
struct VaultTests {
    struct Fixture {
        let home: DeviceKeys
        /// Of the vault's key type: a post-quantum vault admits only post-quantum devices.
        let phone: DeviceKeys
        var vault: SignedVault
        var pin: VaultPin
        let kit: RecoveryKit

        init(postQuantum: Bool = false) throws {
            home = DeviceKeys.generate(postQuantum: postQuantum)
            phone = DeviceKeys.generate(postQuantum: postQuantum)
            let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: postQuantum)
            vault = created.vault
            pin = created.pin
            kit = created.kit
        }

        var homeActions: VaultHome { VaultHome(credentials: home) }

        mutating func approvePhone() throws {
            vault = try homeActions.approve(
                name: "iPhone", signingKey: phone.signingKey.publicKey,
                wrapRecipient: phone.identity.recipientString,
                in: vault)
        }

        /// What a following device does with a vault.json it finds: parse, accept against its pin.
        static func follow(_ bytes: Data, pin: VaultPin) throws -> (SignedVault, VaultPin) {
            let vault = try SignedVault(parsing: bytes)
            return (vault, try vault.accept(pinned: pin))
        }
    }

    @Test("create, then a second device joins: one wrap more, no new epoch, and it reads home's notes")
    func addDevice() throws {
        var f = try Fixture()
        let before = try VaultNote.seal(
            markdown: "# Groceries", path: "notes/\(f.home.id)/1.age", vault: f.vault.body, author: f.home)
        try f.approvePhone()
        #expect(f.vault.body.generation == 2 && f.vault.body.epochs.count == 1)
        #expect(f.vault.body.currentEpoch.wraps.count == 3)  // home, phone, recovery
        let (followed, pin) = try Fixture.follow(try f.vault.encoded(), pin: f.pin)
        #expect(pin.generation == 2)
        let keyring = try VaultKeyring(vault: followed.body, credentials: f.phone)
        let opened = try VaultNote.open(
            before, path: "notes/\(f.home.id)/1.age", vault: followed.body, keyring: keyring)
        #expect(opened.markdown == "# Groceries" && opened.author == f.home.id && opened.epoch == 1)
    }

    @Test("removal starts an epoch: the removed device is refused its keys and cannot open new notes")
    func removeDevice() throws {
        var f = try Fixture()
        try f.approvePhone()
        let phoneKeysBefore = try VaultKeyring(vault: f.vault.body, credentials: f.phone)
        let old = try VaultNote.seal(
            markdown: "old", path: "notes/\(f.phone.id)/1.age", vault: f.vault.body, author: f.phone)
        let record = VaultBody.NoteReference(
            path: "notes/\(f.phone.id)/1.age", sha256: SHA256.hash(data: old).description)
        let change = try f.homeActions.remove(deviceID: f.phone.id, from: f.vault, existingNotes: [record])
        f.vault = change.vault
        #expect(f.vault.body.epochs.count == 2 && f.vault.body.currentEpoch.wraps[f.phone.id] == nil)

        expectSempereError(.removed) { try VaultKeyring(vault: f.vault.body, credentials: f.phone) }
        let fresh = try VaultNote.seal(
            markdown: "new", path: "notes/\(f.home.id)/2.age", vault: f.vault.body, author: f.home)
        // The removed device's old keys do not open the new epoch's note.
        let unreadable = expectSempereError(.untrustedNote) {
            try VaultNote.open(fresh, path: "notes/\(f.home.id)/2.age", vault: f.vault.body, keyring: phoneKeysBefore)
        }
        #expect(unreadable?.reason.contains("does not open with any of this vault's keys") == true)
        // Home reads both: the new note, and the phone's old note through the record.
        let homeKeys = try VaultKeyring(
            vault: f.vault.body, credentials: f.home, fileLists: EpochFileLists([change.fileList]))
        #expect(
            try VaultNote.open(fresh, path: "notes/\(f.home.id)/2.age", vault: f.vault.body, keyring: homeKeys).epoch
                == 2)
        let oldOpened = try VaultNote.open(
            old, path: "notes/\(f.phone.id)/1.age", vault: f.vault.body, keyring: homeKeys)
        #expect(oldOpened.markdown == "old" && oldOpened.author == f.phone.id && oldOpened.epoch == 1)
    }

    @Test("a removed device writing after its removal is set aside, not read")
    func removedDeviceWritesLate() throws {
        var f = try Fixture()
        try f.approvePhone()
        let staleBody = f.vault.body  // what the phone still has
        let change = try f.homeActions.remove(deviceID: f.phone.id, from: f.vault, existingNotes: [])
        f.vault = change.vault
        let late = try VaultNote.seal(
            markdown: "written after removal", path: "notes/\(f.phone.id)/9.age", vault: staleBody, author: f.phone)
        let homeKeys = try VaultKeyring(
            vault: f.vault.body, credentials: f.home, fileLists: EpochFileLists([change.fileList]))
        let error = expectSempereError(.untrustedNote) {
            try VaultNote.open(late, path: "notes/\(f.phone.id)/9.age", vault: f.vault.body, keyring: homeKeys)
        }
        // Said as what it is: written by a device after its removal, not "not signed by a listed device".
        #expect(error?.reason.contains("which was removed from the vault") == true, "\(String(describing: error))")
        #expect(error?.setAsideCategory == .fromBeforeADeviceChange)
    }

    @Test("a forged note: a listed device named as its author, a signature line that does not verify")
    func forgedSignature() throws {
        var f = try Fixture()
        try f.approvePhone()
        let keys = try VaultKeyring(vault: f.vault.body, credentials: f.phone)
        let recipient = try #require(try AgeKeyFile.recipients(from: f.vault.body.currentEpoch.recipient).first)
        let path = "notes/\(f.home.id)/1.age"
        // A well-formed trailer naming home as the author, with a signature made by a key that is not home's
        // over exactly the bytes home would sign, then one with home's genuine signature of other text.
        let markdown = "# Transfer\n\nSend everything to the provider.\n"
        let stranger = DeviceKeys.generate(postQuantum: false)
        let signedBytes =
            Data(f.vault.body.vaultID.utf8) + Data([0]) + Data(path.utf8) + Data([0]) + Data("1".utf8) + Data([0])
            + Data(markdown.utf8)
        let strangerSignature = try stranger.signingKey.signature(
            for: signedBytes, context: Data("sempere/v1/note".utf8))
        let genuine = try VaultNote.seal(markdown: "# Hello\n", path: path, vault: f.vault.body, author: f.home)
        let genuineTrailer = try #require(
            String(
                decoding: try Age.decrypt(genuine, identities: [try Self.epochKey(f, credentials: f.home)]),
                as: UTF8.self
            )
            .components(separatedBy: "\n<!-- ").last)
        for trailer in [
            "sempere-note v1 author=\(f.home.id) epoch=1 signature=\(strangerSignature.rawRepresentation.base64EncodedString()) -->\n",
            genuineTrailer,
        ] {
            let forged = try Age.encrypt(Data((markdown + "\n<!-- " + trailer).utf8), to: [recipient])
            let error = expectSempereError(.untrustedNote) {
                try VaultNote.open(forged, path: path, vault: f.vault.body, keyring: keys)
            }
            #expect(error?.reason.contains("its signature does not verify") == true, "\(String(describing: error))")
        }
        // The same construction with home's own key over those bytes is home's note: the check is the signature.
        let homeSignature = try f.home.signingKey.signature(for: signedBytes, context: Data("sempere/v1/note".utf8))
        let real = try Age.encrypt(
            Data(
                (markdown
                    + "\n<!-- sempere-note v1 author=\(f.home.id) epoch=1 signature=\(homeSignature.rawRepresentation.base64EncodedString()) -->\n")
                    .utf8), to: [recipient])
        #expect(try VaultNote.open(real, path: path, vault: f.vault.body, keyring: keys).markdown == markdown)
    }

    /// The current epoch's vault identity, unwrapped with `credentials`.
    @Test("what a version replaces is signed: raising, dropping or moving a replaced version breaks the signature")
    func replacesIsSigned() throws {
        var f = try Fixture()
        try f.approvePhone()
        let keys = try VaultKeyring(vault: f.vault.body, credentials: f.home)
        let recipient = try #require(try AgeKeyFile.recipients(from: f.vault.body.currentEpoch.recipient).first)
        let note = String(repeating: "ab", count: 16)
        let path = "notes/\(f.phone.id)/\(note).age"
        let sealed = try VaultNote.seal(
            markdown: "# Plan\nby bike\n", path: path, vault: f.vault.body, author: f.phone, version: 1,
            replaces: [f.home.id: 2])
        let opened = try VaultNote.open(sealed, path: path, vault: f.vault.body, keyring: keys)
        #expect(opened.replaces == [f.home.id: 2] && opened.author == f.phone.id)
        let plaintext = String(
            decoding: try Age.decrypt(sealed, identities: [try Self.epochKey(f, credentials: f.phone)]), as: UTF8.self)
        #expect(plaintext.contains("<!-- sempere-note v3 ") && plaintext.contains("replaces=\(f.home.id):2 "))
        // The provider cannot read the line, but were it able to: each change is refused as forged.
        let changes = [
            plaintext.replacingOccurrences(of: "replaces=\(f.home.id):2", with: "replaces=\(f.home.id):9"),
            plaintext.replacingOccurrences(of: "replaces=\(f.home.id):2 ", with: "")
                .replacingOccurrences(of: "sempere-note v3", with: "sempere-note v2"),
            plaintext.replacingOccurrences(of: "replaces=\(f.home.id):2", with: "replaces=\(f.home.id):1"),
        ]
        for changed in changes {
            #expect(changed != plaintext)
            let forged = try Age.encrypt(Data(changed.utf8), to: [recipient])
            let error = expectSempereError(.untrustedNote) {
                try VaultNote.open(forged, path: path, vault: f.vault.body, keyring: keys)
            }
            #expect(error?.reason.contains("its signature does not verify") == true, "\(String(describing: error))")
        }
        // A line that names its own author, or no version, does not parse: no signature line at all.
        for field in ["replaces=\(f.phone.id):1", "replaces=\(f.home.id):", "replaces="] {
            let bad = plaintext.replacingOccurrences(of: "replaces=\(f.home.id):2", with: field)
            let error = expectSempereError(.untrustedNote) {
                try VaultNote.open(
                    try Age.encrypt(Data(bad.utf8), to: [recipient]), path: path, vault: f.vault.body, keyring: keys)
            }
            #expect(
                error?.reason.contains("no author signature line") == true, "\(field): \(String(describing: error))")
        }
    }

    static func epochKey(_ f: Fixture, credentials: DeviceKeys) throws -> any AgeIdentity {
        let wrap = try #require(f.vault.body.currentEpoch.wraps[credentials.id])
        return try WrapIdentity(
            string: String(
                decoding: try Age.decrypt(Data(wrap.utf8), identities: [credentials.identity.ageIdentity]),
                as: UTF8.self)
        ).ageIdentity
    }

    @Test("the provider cannot forge a note, move one, or sign one with a key of its own")
    func forgedNotes() throws {
        var f = try Fixture()
        try f.approvePhone()
        let keys = try VaultKeyring(vault: f.vault.body, credentials: f.phone)
        let recipient = try #require(try AgeKeyFile.recipients(from: f.vault.body.currentEpoch.recipient).first)
        // 1. An age file to the vault's (public) recipient, with no signature.
        let unsigned = try Age.encrypt(Data("pay the provider".utf8), to: [recipient])
        // 2. A signature line made with a key that is not a device's.
        let stranger = DeviceKeys.generate(postQuantum: false)
        let impostor = try VaultNote.seal(
            markdown: "hello", path: "notes/\(stranger.id)/1.age", vault: Self.listing(stranger, in: f.vault.body),
            author: stranger)
        // 3. A genuine note moved to another path.
        let genuine = try VaultNote.seal(
            markdown: "real", path: "notes/\(f.home.id)/1.age", vault: f.vault.body, author: f.home)
        for (file, path) in [
            (unsigned, "notes/\(stranger.id)/0.age"), (impostor, "notes/\(stranger.id)/1.age"),
            (genuine, "notes/\(f.home.id)/2.age"),
        ] {
            let error = #expect(throws: SempereError.self) {
                try VaultNote.open(file, path: path, vault: f.vault.body, keyring: keys)
            }
            #expect(error?.code == .untrustedNote, "\(path)")
        }
        #expect(
            try VaultNote.open(genuine, path: "notes/\(f.home.id)/1.age", vault: f.vault.body, keyring: keys).markdown
                == "real")
    }

    @Test("a listed device that signs a note into another device's folder is refused: the signer is the author")
    func aNoteInAnotherDevicesFolder() throws {
        var f = try Fixture()
        try f.approvePhone()
        let keys = try VaultKeyring(vault: f.vault.body, credentials: f.home)
        // The phone is listed and its signature is genuine, over the home device's path: it would overwrite
        // home's note, and a listing that takes the author from the path would show home as its author.
        let path = "notes/\(f.home.id)/1.age"
        let overwrite = try VaultNote.seal(markdown: "rewritten", path: path, vault: f.vault.body, author: f.phone)
        let error = #expect(throws: SempereError.self) {
            try VaultNote.open(overwrite, path: path, vault: f.vault.body, keyring: keys)
        }
        #expect(error?.code == .untrustedNote)
        #expect(
            error?.reason.contains("not by the device whose folder holds it") == true, "\(String(describing: error))")
        // The same note in the phone's own folder is the phone's.
        let own = "notes/\(f.phone.id)/1.age"
        let mine = try VaultNote.seal(markdown: "mine", path: own, vault: f.vault.body, author: f.phone)
        #expect(try VaultNote.open(mine, path: own, vault: f.vault.body, keyring: keys).author == f.phone.id)
    }

    /// A body that lists `device` (so seal() agrees to write), for making an impostor's note.
    static func listing(_ device: DeviceKeys, in body: VaultBody) -> VaultBody {
        var body = body
        body.devices.append(
            VaultBody.Device(
                id: device.id, name: "impostor", signingKey: device.signingKey.publicKey.rawRepresentation,
                wrapRecipient: device.identity.recipientString, addedIn: 1))
        return body
    }

    @Test("the provider cannot roll the list back, fork it, swap in another vault, or inject a device")
    func deviceListAttacks() throws {
        var f = try Fixture()
        let generation1 = try f.vault.encoded()
        try f.approvePhone()
        let (_, pin2) = try Fixture.follow(try f.vault.encoded(), pin: f.pin)

        // Rollback: the old generation after the new one was accepted.
        expectSempereError(.rollback) { try Fixture.follow(generation1, pin: pin2) }

        // Injected device: an entry added to the body without home's signature.
        var injected = f.vault.body
        let stranger = DeviceKeys.generate(postQuantum: false)
        injected = Self.listing(stranger, in: injected)
        injected.generation += 1
        let forged = try SignedVaultForgery.resign(f.vault, body: injected, with: stranger)
        let injectedError = #expect(throws: SempereError.self) { try Fixture.follow(forged, pin: pin2) }
        #expect(injectedError?.code == .badSignature)
        let unsigned = try SignedVaultForgery.replaceBody(f.vault, with: injected)
        let unsignedError = #expect(throws: SempereError.self) { try Fixture.follow(unsigned, pin: pin2) }
        #expect(unsignedError?.code == .badSignature)

        // Another vault, even a genuine one, is refused.
        let other = try Fixture()
        let swapError = #expect(throws: SempereError.self) { try Fixture.follow(try other.vault.encoded(), pin: pin2) }
        #expect(swapError?.code == .wrongVault)

        // Fork: two different lists of one generation (only a compromised home could sign both).
        let renamed = try f.homeActions.rename(deviceID: f.phone.id, to: "Work phone", in: f.vault)
        let (_, pin3) = try Fixture.follow(try renamed.encoded(), pin: pin2)
        let otherRename = try f.homeActions.rename(deviceID: f.phone.id, to: "Old phone", in: f.vault)
        let forkError = #expect(throws: SempereError.self) { try Fixture.follow(try otherRename.encoded(), pin: pin3) }
        #expect(forkError?.code == .fork)

        // Not home: the phone cannot change the list.
        let phoneActions = VaultHome(credentials: f.phone)
        let notHome = #expect(throws: SempereError.self) {
            try phoneActions.rename(deviceID: f.home.id, to: "mine", in: f.vault)
        }
        #expect(notHome?.code == .notHome)
    }

    @Test("the recovery kit opens the current epoch; a post-quantum vault uses age1pq recipients")
    func recoveryAndPostQuantum() throws {
        var f = try Fixture(postQuantum: true)
        try f.approvePhone()
        #expect(f.vault.body.currentEpoch.recipient.hasPrefix("age1pq1"))
        let note = try VaultNote.seal(
            markdown: "pq", path: "notes/\(f.home.id)/1.age", vault: f.vault.body, author: f.home)
        let kitIdentity = try RecoveryKit(secret: f.kit.secretRepresentation, vaultID: f.vault.body.vaultID)
            .wrapIdentity(postQuantum: true)
        let wrap = try #require(f.vault.body.currentEpoch.wraps["recovery"])
        let epochKey = try WrapIdentity(
            string: String(
                decoding: try Age.decrypt(Data(wrap.utf8), identities: [kitIdentity.ageIdentity]), as: UTF8.self))
        let plaintext = String(decoding: try Age.decrypt(note, identities: [epochKey.ageIdentity]), as: UTF8.self)
        #expect(plaintext.hasPrefix("pq\n<!-- sempere-note v2 "))
    }

    @Test("stock age reads a note with one extra age -d for the epoch's key")
    func stockAge() throws {
        var f = try Fixture()
        try f.approvePhone()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-stock-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let note = try VaultNote.seal(
            markdown: "# Read me with age", path: "notes/\(f.home.id)/1.age", vault: f.vault.body, author: f.home)
        try note.write(to: folder.appendingPathComponent("note.age"))
        try Data((try #require(f.phone.identity as? WrapIdentity).string + "\n").utf8)
            .write(to: folder.appendingPathComponent("device.key"))
        try Data(try #require(f.vault.body.currentEpoch.wraps[f.phone.id]).utf8)
            .write(to: folder.appendingPathComponent("epoch.age"))
        func age(_ arguments: [String]) throws -> String {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/age")
            process.arguments = arguments
            process.currentDirectoryURL = folder
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "age \(arguments)")
            return String(decoding: data, as: UTF8.self)
        }
        _ = try age(["-d", "-i", "device.key", "-o", "epoch.key", "epoch.age"])
        let text = try age(["-d", "-i", "epoch.key", "note.age"])
        #expect(text.hasPrefix("# Read me with age\n<!-- sempere-note v2 author=\(f.home.id) epoch=1 version=1 "))
    }
}

/// What a storage provider can do to vault.json without home's key.
enum SignedVaultForgery {
    /// The file with `body` in place of the signed one, the signature left as it was.
    static func replaceBody(_ vault: SignedVault, with body: VaultBody) throws -> Data {
        let signed = try SignedVault.sign(body, signer: vault.signer, key: HybridSignature.PrivateKey())
        var object = try #require(try JSONSerialization.jsonObject(with: signed.encoded()) as? [String: Any])
        object["signature"] = vault.signature.rawRepresentation.base64EncodedString()
        return try JSONSerialization.data(withJSONObject: object)
    }

    /// The file with `body`, signed by `stranger` but still naming home as the signer.
    static func resign(_ vault: SignedVault, body: VaultBody, with stranger: DeviceKeys) throws -> Data {
        try SignedVault.sign(body, signer: vault.signer, key: stranger.signingKey).encoded()
    }
}
