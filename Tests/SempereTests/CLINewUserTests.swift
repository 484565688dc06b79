import Foundation
import Testing

/// `sempere` tried as a new user would, mistakes included: each test is a step that once went wrong.
extension CLITests {
    @Test("a deleted vault.json: the phone says what happened, home puts it back, create refuses the folder")
    func deletedVaultFile() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Self.twoDevices(scratch)
        #expect(try scratch.run("A", ["new", "Taxes", "--text", "keep me"]).status == 0)
        let vaultFile = URL(fileURLWithPath: scratch.vault).appendingPathComponent("vault.json")
        let signed = try Data(contentsOf: vaultFile)
        try FileManager.default.removeItem(at: vaultFile)

        // The phone changes nothing, and says who puts it back.
        let phone = try scratch.run("B", ["ls"])
        #expect(phone.status == 1 && phone.err.contains("vault.json is missing"), "\(phone.err)")
        #expect(phone.err.contains("Laptop, the home device, keeps the device list it signed"))
        #expect(!FileManager.default.fileExists(atPath: vaultFile.path))

        // A new vault in that folder would set every note aside: refused, and the folder is untouched.
        let create = try scratch.run("C", ["create", scratch.vault, "--name", "Other"])
        #expect(create.status == 1 && create.err.contains("vault.json was deleted"), "\(create.err)")
        #expect(!FileManager.default.fileExists(atPath: vaultFile.path))

        // Home puts back exactly the list it signed, and says so; then the phone reads the note.
        let home = try scratch.run("A", ["ls"])
        #expect(home.status == 0 && home.err.contains("put back the device list it follows"), "\(home.err)")
        #expect(try Data(contentsOf: vaultFile) == signed)
        let after = try scratch.run("B", ["ls"])
        #expect(after.status == 0 && after.out.contains("Taxes"), "\(after.err)")
    }

    @Test(
        "join by pasted codes, both ways; a second request replaces the first; joining a missing folder makes no keys")
    func joinWithCodes() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        #expect(try scratch.run("A", ["create", scratch.vault, "--name", "Laptop"]).status == 0)

        let missing = try scratch.run(
            "B", ["join", scratch.root.appendingPathComponent("nope").path, "--name", "Phone"])
        #expect(missing.status == 1 && missing.err.contains("does not exist"), "\(missing.err)")
        let keys = (try? FileManager.default.contentsOfDirectory(atPath: scratch.config("B") + "/keys")) ?? []
        #expect(keys.isEmpty, "\(keys)")

        let first = try #require(
            try scratch.run("B", ["join", scratch.vault, "--name", "Phone", "--json"]).json() as? [String: Any])
        let asked = try scratch.run("B", ["join", scratch.vault, "--name", "Phone", "--json"])
        let request = try #require(try asked.json() as? [String: Any])
        let code = try #require(request["code"] as? String)
        #expect(code.hasPrefix("sempere-join-request:") && request["expires"] as? String != nil)
        // Only the newest request is in the folder: the first one's words no longer approve anything.
        let requests = try FileManager.default.contentsOfDirectory(atPath: scratch.vault + "/requests")
        #expect(requests.count == 1, "\(requests)")
        let old = try scratch.run("A", ["devices", "approve", "--words", try #require(first["words"] as? String)])
        #expect(old.status == 1 && old.err.contains("no join request here shows the words"), "\(old.err)")

        let approved = try scratch.run("A", ["devices", "approve", "--code", code, "--json"])
        #expect(approved.status == 0, "\(approved.err)")
        let homeCode = try #require((try approved.json() as? [String: Any])?["code"] as? String)
        // One character changed in the middle: another 256-bit value, refused as not this vault's.
        var altered = Array(homeCode)
        let index = "sempere-join-approval:".count + 10
        altered[index] = altered[index] == "A" ? "B" : "A"
        let wrong = try scratch.run("B", ["join", scratch.vault, "--code", String(altered)])
        #expect(wrong.status == 1 && wrong.err.contains("do not match this vault"), "\(wrong.err)")
        let joined = try scratch.run("B", ["join", scratch.vault, "--code", homeCode])
        #expect(joined.status == 0 && joined.out.contains("Joined the vault"), "\(joined.err)")
        let text = try scratch.run("B", ["join", scratch.vault, "--name", "Phone"])
        #expect(text.status == 1 && text.err.contains("already in the vault"), "\(text.err)")
    }

    @Test(
        "refused with what to do: a weak passphrase, non-UTF-8 import, export into the vault, an emptied note, a duplicate name"
    )
    func newUserMistakes() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }

        // A one-character passphrase for the copy that sits in the synced folder: nothing is created.
        let weak = try scratch.run(
            "A",
            ["create", scratch.vault, "--name", "Laptop", "--passphrase-copy", "--secret-env", "SEMPERE_PASSPHRASE"],
            environment: ["SEMPERE_PASSPHRASE": "x"])
        #expect(weak.status == 1 && weak.err.contains("at least 16 characters"), "\(weak.err)")
        #expect(!FileManager.default.fileExists(atPath: scratch.vault + "/vault.json"))

        let (_, phoneID) = try Self.twoDevices(scratch)

        // Latin-1 bytes are refused, and the valid file beside them is not imported either.
        let good = scratch.root.appendingPathComponent("good.md")
        let latin1 = scratch.root.appendingPathComponent("latin1.md")
        try Data("# Fine\n".utf8).write(to: good)
        try Data([0x23, 0x20, 0x43, 0x61, 0x66, 0xE9, 0x0A]).write(to: latin1)  // "# Café" in Latin-1
        let imported = try scratch.run("A", ["import", good.path, latin1.path])
        #expect(imported.status == 1 && imported.err.contains("is not UTF-8 text"), "\(imported.err)")
        #expect(imported.err.contains("iconv"))
        let listed = try #require(try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])
        #expect((listed["notes"] as? [Any])?.isEmpty == true)

        // Plaintext into the synced vault folder is refused; nothing is written there.
        #expect(try scratch.run("A", ["new", "Secret", "--text", "plain"]).status == 0)
        let inside = scratch.vault + "/export"
        let export = try scratch.run("A", ["export", inside])
        #expect(export.status == 1 && export.err.contains("inside the vault folder"), "\(export.err)")
        #expect(!FileManager.default.fileExists(atPath: inside))

        // An editor that empties the note saves nothing.
        let id = try #require(
            ((try scratch.run("A", ["ls", "--json"]).json() as? [String: Any])?["notes"] as? [[String: Any]])?.first?[
                "id"] as? String)
        let emptied = try scratch.run("A", ["edit", id], environment: ["EDITOR": "truncate -s 0"])
        #expect(emptied.status == 1 && emptied.err.contains("empty, so it was not saved"), "\(emptied.err)")
        #expect(try scratch.run("A", ["cat", id]).out.contains("plain"))

        // Two devices of one name could not be told apart in commands.
        let rename = try scratch.run("A", ["devices", "rename", phoneID, "laptop"])
        #expect(rename.status == 1 && rename.err.contains("another device of this vault is named"), "\(rename.err)")

        // A device that is not home is told so, and nothing about parts of a plan.
        let notHome = try scratch.run("B", ["devices", "remove", "Laptop"])
        #expect(notHome.status == 1 && notHome.err.contains("only the home device (Laptop)"), "\(notHome.err)")
        #expect(!notHome.err.contains("part 2"))

        // `sempere help <command>`, which the help advertises.
        let help = try scratch.run("A", ["help", "devices", "approve"])
        #expect(help.status == 0 && help.out.contains("USAGE: sempere devices approve"), "\(help.err)")
    }
}

extension CLITests {
    @Test("Make Home: the laptop hands home to the phone, which then removes the laptop; the laptop is told")
    func makeHome() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Self.twoDevices(scratch)
        #expect(try scratch.run("A", ["new", "Taxes", "--text", "keep me"]).status == 0)
        let notListed = try scratch.run("A", ["devices", "make-home", "Tablet"])
        #expect(notListed.status == 1 && notListed.err.contains("no device \"Tablet\""), "\(notListed.err)")
        let handed = try scratch.run("A", ["devices", "make-home", "Phone", "--json"])
        #expect(handed.status == 0, "\(handed.err)")
        #expect((try handed.json() as? [String: Any])?["epoch"] as? Int == 2)

        // The phone is told it is home, and manages the devices; the laptop no longer does.
        let list = try scratch.run("B", ["devices", "list", "--json"])
        #expect(list.err.contains("this device is home now"), "\(list.err)")
        let devices = try #require((try list.json() as? [String: Any])?["devices"] as? [[String: Any]])
        #expect(devices.first { $0["name"] as? String == "Phone" }?["home"] as? Bool == true)
        let refused = try scratch.run("A", ["devices", "rename", "Phone", "Mobile"])
        #expect(refused.status == 1 && refused.err.contains("only the home device (Phone)"), "\(refused.err)")
        let removed = try scratch.run("B", ["devices", "remove", "Laptop"])
        #expect(removed.status == 0, "\(removed.err)")

        // The laptop is out; its note of epoch 1 stays readable to the phone through the record.
        let out = try scratch.run("A", ["ls"])
        #expect(out.status == 1 && out.err.contains("removed"), "\(out.err)")
        let listed = try scratch.run("B", ["ls"])
        #expect(
            listed.status == 0 && listed.out.contains("Taxes") && !listed.out.contains("Set aside"), "\(listed.out)")
        #expect(FileManager.default.fileExists(atPath: scratch.vault + "/records/epoch-2.json"))
    }
}

extension CLITests {
    @Test(
        "takeover: a device with only the kit becomes home; the phone is kept and alerted until it acks; the old home is out"
    )
    func takeover() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let kit = try Self.twoDevicesWithKit(scratch).kit
        #expect(try scratch.run("A", ["new", "Taxes", "--text", "keep me"]).status == 0)

        // The laptop is lost. A new device, C, has only the kit.
        let unsure = try scratch.run("C", ["takeover", scratch.vault, "--name", "Desk", "--secret-stdin"], input: kit)
        #expect(unsure.status == 1 && unsure.err.contains("--keep") && unsure.err.contains("Phone"), "\(unsure.err)")
        let wrongKit = try scratch.run(
            "C", ["takeover", scratch.vault, "--name", "Desk", "--keep", "Phone", "--secret-env", "SEMPERE_KIT"],
            environment: ["SEMPERE_KIT": "SEMPERE-KIT-1-" + String(repeating: "A", count: 52)])
        #expect(wrongKit.status == 1, "\(wrongKit.err)")
        let took = try scratch.run(
            "C", ["takeover", scratch.vault, "--name", "Desk", "--keep", "Phone", "--json", "--secret-stdin"],
            input: kit)
        #expect(took.status == 0, "\(took.err)")
        #expect((try took.json() as? [String: Any])?["devices"] as? [String] == ["Phone", "Desk"])

        // The phone follows the new home and reads the laptop's note, and shows the alert with the guide's advice on
        // every command until it is acknowledged.
        let phone = try scratch.run("B", ["ls"])
        #expect(phone.status == 0 && phone.err.contains("THE VAULT WAS TAKEN OVER"), "\(phone.err)")
        #expect(phone.out.contains("Taxes"))
        #expect(
            phone.err.contains(
                "someone has your recovery kit: replace the kit, from the device that now manages devices (Desk), at "
                    + "once"), "\(phone.err)")
        let again = try scratch.run("B", ["ls"])
        #expect(again.err.contains("THE VAULT WAS TAKEN OVER") && again.err.contains("sempere alerts --ack"))
        let listed = try scratch.run("B", ["alerts", "--json"])
        #expect(listed.status == 0, "\(listed.err)")
        let alerts = try #require(try listed.json() as? [[String: Any]])
        #expect(alerts.count == 1 && (alerts.first?["text"] as? String)?.contains("Desk") == true)
        let status = try scratch.run("B", ["status"])
        #expect(status.status == 0 && status.out.contains("Alerts       1"), "\(status.out) \(status.err)")
        let acknowledged = try scratch.run("B", ["alerts", "--ack"])
        #expect(acknowledged.status == 0 && acknowledged.out.contains("Acknowledged 1 alert"), "\(acknowledged.err)")
        #expect(!(try scratch.run("B", ["ls"])).err.contains("TAKEN OVER"))
        #expect(try scratch.run("B", ["alerts"]).out.contains("No alerts."))
        let desk = try scratch.run("C", ["ls"])
        #expect(desk.status == 0 && desk.out.contains("Taxes"), "\(desk.err)")
        // The old home, found again (or in a thief's hands), is out: it was not kept.
        let laptop = try scratch.run("A", ["ls"])
        #expect(laptop.status == 1 && laptop.err.contains("removed"), "\(laptop.err)")
    }
}

extension CLITests {
    @Test("kit replace by home alone waits, every device shows it, and a takeover with the current kit cancels it")
    func kitReplacement() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let kit = try Self.twoDevicesWithKit(scratch).kit

        let replaced = try scratch.run("A", ["kit", "replace", "--json"])
        #expect(replaced.status == 0, "\(replaced.err)")
        let answer = try #require(try replaced.json() as? [String: Any])
        #expect(answer["effective_at"] as? String != "now" && answer["recovery_kit"] as? String != kit)
        let phone = try scratch.run("B", ["ls"])
        #expect(phone.err.contains("THE RECOVERY KIT IS BEING REPLACED by the home device, Laptop"), "\(phone.err)")
        let twice = try scratch.run("A", ["kit", "replace"])
        #expect(twice.status == 1 && twice.err.contains("already waiting"), "\(twice.err)")

        // The phone's owner did not ask for it: the current kit takes over, which cancels the replacement.
        let took = try scratch.run(
            "B", ["takeover", scratch.vault, "--keep", "", "--secret-env", "SEMPERE_KIT"],
            environment: ["SEMPERE_KIT": kit])
        #expect(took.status == 0, "\(took.err)")
        let after = try scratch.run("B", ["ls"])
        #expect(after.status == 0 && !after.err.contains("BEING REPLACED"), "\(after.err)")
        // Now home, the phone replaces the kit at once with the current kit's signature.
        let now = try scratch.run(
            "B", ["kit", "replace", "--with-current-kit", "--json", "--secret-stdin"], input: kit)
        #expect(now.status == 0, "\(now.err)")
        let effective = (try now.json() as? [String: Any])?["effective_at"] as? String
        #expect(effective == "now")
    }

    @Test("the kit page is never written into the vault or over a file; names from the folder are printed escaped")
    func kitPageAndEscapes() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let passphrase = ["SEMPERE_PASSPHRASE": "correct horse battery staple"]
        #expect(
            try scratch.run(
                "A",
                [
                    "create", scratch.vault, "--name", "Laptop", "--passphrase-copy", "--secret-env",
                    "SEMPERE_PASSPHRASE",
                ], environment: passphrase
            ).status == 0)
        let inside = try scratch.run(
            "A", ["kit", "print", "--html", scratch.vault + "/kit.html", "--secret-env", "SEMPERE_PASSPHRASE"],
            environment: passphrase)
        #expect(inside.status == 1 && inside.err.contains("inside the vault folder"), "\(inside.err)")
        #expect(!FileManager.default.fileExists(atPath: scratch.vault + "/kit.html"))
        let existing = scratch.root.appendingPathComponent("notes.txt")
        try Data("mine".utf8).write(to: existing)
        let over = try scratch.run(
            "A", ["kit", "print", "--html", existing.path, "--secret-env", "SEMPERE_PASSPHRASE"],
            environment: passphrase)
        #expect(over.status == 1 && over.err.contains("exists already"), "\(over.err)")
        #expect(try String(contentsOf: existing, encoding: .utf8) == "mine")

        // A stray file whose name would draw a fake note line.
        let name = "x\nabcd1234  2026-01-01T00:00:00Z  Laptop  Wire the money"
        #expect(FileManager.default.createFile(atPath: scratch.vault + "/" + name, contents: Data()))
        let listing = try scratch.run("A", ["ls"])
        #expect(listing.status == 0, "\(listing.err)")
        #expect(!listing.out.split(separator: "\n").contains { $0.hasPrefix("abcd1234") }, "\(listing.out)")
        #expect(listing.out.contains("x\\u{a}abcd1234"), "\(listing.out)")
    }
}
