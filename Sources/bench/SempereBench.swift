import Foundation
import Sempere
import SiblingsCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// Sempere's vault operations at 100 and at 10,000 notes (issue "Sempere, part 1", benchmark): adding a
/// device must cost the same at both sizes and touch O(1) files; removing one rewrites no note; and
/// the cost of saving and opening one note, and of opening every note (what `sempere ls` does).
func sempereTable(_ options: Bench) throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-bench-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    let home = DeviceKeys.generate(postQuantum: false)
    let clock = ContinuousClock()
    func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    var rows: [(String, String)] = []
    var approveTimes: [Int: Double] = [:]
    var removeTimes: [Int: Double] = [:]
    var handoffTimes: [Int: Double] = [:]
    var takeoverTimes: [Int: Double] = [:]
    var floorTimes: [Int: Double] = [:]
    var vaultSizes: [Int: Int] = [:]
    for count in [100, 10_000] {
        let folder = VaultFolder(url: root.appendingPathComponent("vault-\(count)"))
        try folder.create()
        let created = try VaultHome.createVault(homeName: "home", credentials: home, postQuantum: false)
        try folder.write(created.vault)
        var saveTotal = Duration.zero
        for index in 0..<count {
            let path = VaultFolder.notePath(author: home.id, noteID: VaultFolder.newNoteID())
            let start = clock.now
            try folder.writeNote(
                try VaultNote.seal(
                    markdown: "# Note \(index)\n\nSome text.", path: path, vault: created.vault.body, author: home),
                at: path)
            saveTotal += clock.now - start
        }
        let before = try folder.noteReferences()

        // Adding a device: the best of a few approvals (each a new device), vault.json written.
        var best = Double.infinity
        var vault = created.vault
        for _ in 0..<max(3, options.rounds) {
            let device = DeviceKeys.generate(postQuantum: false)
            let start = clock.now
            vault = try VaultHome(credentials: home).approve(
                name: "device \(vault.body.devices.count)", signingKey: device.signingKey.publicKey,
                wrapRecipient: device.identity.recipientString,
                in: vault)
            try folder.write(vault)
            best = min(best, seconds(clock.now - start))
        }
        approveTimes[count] = best
        guard try folder.noteReferences() == before else { throw BenchError("adding a device changed a note") }

        // Opening every note, one thread (what a listing costs without the index).
        let keyring = try VaultKeyring(vault: vault.body, credentials: home)
        let start = clock.now
        for path in try folder.notePaths() {
            _ = try VaultNote.open(try folder.readNote(at: path), path: path, vault: vault.body, keyring: keyring)
        }
        let openAll = seconds(clock.now - start)

        // What `sempere ls` does: the encrypted note index, cold (every note opened, on all cores) and
        // warm (files read and hashed, nothing opened), including loading and saving the index.
        let indexFile = root.appendingPathComponent("index-\(count).age")
        let hashesFile = root.appendingPathComponent("hashes-\(count)")
        var listings: [Double] = []
        for _ in 0..<2 {
            let listStart = clock.now
            var index = try NoteIndex.load(from: indexFile, identity: home.identity)
            _ = try index.refresh(folder: folder, vault: vault, keyring: keyring)
            try index.save(to: indexFile, identity: home.identity)
            try NoteHashes(index).save(to: hashesFile)
            listings.append(seconds(clock.now - listStart))
        }

        // Removing a device: no note rewritten.
        let removeStart = clock.now
        // The files are listed as `VaultSession` does: through the device's note hashes, so that a file
        // unchanged since it was hashed is not read again.
        func existing() throws -> [VaultBody.NoteReference] {
            try NoteHashes.load(from: hashesFile).references(folder: folder).references
        }
        let removed = try VaultHome(credentials: home).remove(
            deviceID: vault.body.devices.last!.id, from: vault, existingNotes: try existing())
        try folder.write(removed.fileList)
        try folder.write(removed.vault)
        let removeTime = seconds(clock.now - removeStart)
        guard try folder.noteReferences() == before else { throw BenchError("removing a device rewrote a note") }
        removeTimes[count] = removeTime

        // The floor of any record that checks every file: list the note files and stat each one.
        let floorStart = clock.now
        var statted = 0
        for path in try folder.notePaths() {
            var info = stat()
            if stat(folder.url.path + "/" + path, &info) == 0 { statted += 1 }
        }
        floorTimes[count] = seconds(clock.now - floorStart)
        guard statted == count else { throw BenchError("stat'ed \(statted) of \(count) notes") }

        // Make Home, then a takeover with the kit by the old home (listing the files each time), then more
        // epoch changes until 10, to measure vault.json's growth.
        var current = removed.vault
        guard let second = current.body.devices.first(where: { $0.id != home.id }) else {
            throw BenchError("no second device")
        }
        let handoffStart = clock.now
        let handoff = try VaultHome(credentials: home).makeHome(
            deviceID: second.id, in: current, existingNotes: try existing())
        try folder.write(handoff.fileList)
        try folder.write(handoff.vault)
        handoffTimes[count] = seconds(clock.now - handoffStart)
        current = handoff.vault
        let takeoverStart = clock.now
        let takeover = try VaultTakeover.takeOver(
            current, kit: created.kit, newHome: home, newHomeName: nil, keep: [home.id], existingNotes: try existing())
        try folder.write(takeover.fileList)
        try folder.write(takeover.vault)
        takeoverTimes[count] = seconds(clock.now - takeoverStart)
        current = takeover.vault
        while current.body.epochs.count < 11 {
            let device = DeviceKeys.generate(postQuantum: false)
            current = try VaultHome(credentials: home).approve(
                name: "extra \(current.body.epochs.count)", signingKey: device.publicKey,
                wrapRecipient: device.identity.recipientString, in: current)
            let change = try VaultHome(credentials: home).remove(
                deviceID: device.id, from: current, existingNotes: try existing())
            try folder.write(change.fileList)
            current = change.vault
        }
        vaultSizes[count] = try current.encoded().count

        rows.append(
            (
                "\(count) notes: save one note (seal, sign, atomic write), mean",
                String(format: "%.2f ms", seconds(saveTotal) / Double(count) * 1e3)
            ))
        rows.append(
            (
                "\(count) notes: open one note (read, decrypt, verify), mean",
                String(format: "%.2f ms", openAll / Double(count) * 1e3)
            ))
        rows.append(("\(count) notes: open every note, one thread, no index", String(format: "%.2f s", openAll)))
        rows.append(
            (
                "\(count) notes: `ls` cold (note index empty: all opened, both cores)",
                String(format: "%.2f s", listings[0])
            ))
        rows.append(
            ("\(count) notes: `ls` warm (note index: read and hash only)", String(format: "%.2f s", listings[1])))
        rows.append(
            ("\(count) notes: add a device (files written: 1, vault.json)", String(format: "%.2f ms", best * 1e3)))
        rows.append(
            (
                "\(count) notes: list the note files and stat each (the floor of any record that checks every file)",
                String(format: "%.2f ms", floorTimes[count]! * 1e3)
            ))
        rows.append(
            ("\(count) notes: remove a device (notes rewritten: 0)", String(format: "%.2f ms", removeTime * 1e3)))
        rows.append(
            (
                "\(count) notes: Make Home (a new epoch, the files recorded)",
                String(format: "%.2f ms", handoffTimes[count]! * 1e3)
            ))
        rows.append(
            (
                "\(count) notes: takeover with the kit (a new epoch, the files recorded)",
                String(format: "%.2f ms", takeoverTimes[count]! * 1e3)
            ))
        rows.append(
            (
                "\(count) notes: vault.json after 11 epochs (10 changes)",
                String(format: "%.1f kB", Double(vaultSizes[count]!) / 1e3)
            ))
    }
    say("")
    say("| Sempere, X25519 vault | time |")
    say("|---|---:|")
    for (name, value) in rows { say("| \(name) | \(value) |") }
    say("")
    say(
        String(
            format: "adding a device at 10,000 notes / at 100 notes: %.2f (1.0 = independent of the number of notes)",
            approveTimes[10_000]! / approveTimes[100]!))
    for (name, times) in [("removal", removeTimes), ("Make Home", handoffTimes), ("takeover", takeoverTimes)] {
        say(
            "\(name) at 10,000 notes / at 100 notes: \(String(format: "%.1f", times[10_000]! / times[100]!)) (target: at most 3); "
                + "at 10,000 notes / the floor there: \(String(format: "%.1f", times[10_000]! / floorTimes[10_000]!))"
        )
    }
}

/// `sempere search` at 10,000 notes (issue "Sempere, part 4"): the session's search (a warm listing, then every
/// word matched on every core), beside the anchor a person would script without Sempere, `age -d | grep -qi` once
/// per note file (the vault key as an age identity file; all words must match, as ours).
func sempereSearchTable(_ options: Bench) throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-search-bench-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    let count = 10_000
    let config = root.appendingPathComponent("config")
    let (created, _) = try VaultSession.create(
        folder: root.appendingPathComponent("vault"), homeName: "Laptop", postQuantum: false, passphrase: nil,
        configRoot: config)
    // Notes of a few lines; one in 100 holds both words, on different lines.
    let files = (0..<count).map { index -> URL in
        root.appendingPathComponent("in-\(index).md")
    }
    for (index, file) in files.enumerated() {
        let text =
            index % 100 == 0
            ? "# Trip \(index)\n\nPack the tent.\nCheck the Ferry times.\n"
            : "# Note \(index)\n\nSome text about the day.\nNothing to find here.\n"
        try Data(text.utf8).write(to: file)
    }
    _ = try created.importNotes(files)
    for file in files { try? FileManager.default.removeItem(at: file) }
    let session = try VaultSession(configRoot: config)
    let clock = ContinuousClock()
    func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
    _ = try session.list()  // the note index made (cold), as after the first command
    var ours: [Double] = []
    var found = 0
    for _ in 0..<max(3, options.rounds) {
        let start = clock.now
        found = try session.search("tent ferry").count
        ours.append(seconds(clock.now - start))
    }
    guard found == count / 100 else { throw BenchError("our search found \(found) of \(count / 100)") }

    // The anchor: the vault key as an identity file, and one age -d and grep per note file.
    let identity = root.appendingPathComponent("vault-key.txt")
    let keyring = try VaultKeyring(vault: session.body, credentials: session.keys)
    guard let key = keyring.identities[session.body.currentEpoch.number] else { throw BenchError("no vault key") }
    try Data((key.string + "\n").utf8).write(to: identity)
    chmod(identity.path, 0o600)
    let notes = session.folder.url.appendingPathComponent("notes/\(session.keys.id)").path
    let script = """
        n=0; for f in "\(notes)"/*.age; do t=$(age -d -i "\(identity.path)" "$f") || exit 1
        printf '%s' "$t" | grep -qi tent && printf '%s' "$t" | grep -qi ferry && n=$((n+1)); done; echo $n
        """
    let start = clock.now
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", script]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let anchor = seconds(clock.now - start)
    guard process.terminationStatus == 0, Int(printed.trimmingCharacters(in: .whitespacesAndNewlines)) == found
    else { throw BenchError("the age -d | grep loop found \(printed) (status \(process.terminationStatus))") }
    let best = ours.min()!
    say("")
    say("| `sempere search` at \(count) notes, X25519 vault | time |")
    say("|---|---:|")
    say(
        "| ours: `VaultSession.search(\"tent ferry\")`, warm note index, best of \(ours.count) | \(String(format: "%.3f s", best)) |"
    )
    say(
        "| anchor: `age -d` then `grep -qi` per word, once per note file (bash loop) | \(String(format: "%.1f s", anchor)) |"
    )
    say(String(format: "ours / anchor: %.4f (%d notes found by each)", best / anchor, found))
}
