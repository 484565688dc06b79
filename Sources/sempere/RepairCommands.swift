import CommandLineKit
import Foundation
import Sempere

#if canImport(Glibc)
    import Glibc
#endif

struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "List what is set aside, by category, and restore or delete each entry.",
        discussion: """
            Files that are never shown as notes (written by a device after its removal, old versions or deleted \
            notes the storage provider put back, forged or moved files, sync conflict copies) are listed here with \
            the reason. Nothing is deleted unless you say so: `sempere repair restore <path>` makes the text a \
            note of this device, `sempere repair delete <path>` deletes the file; each asks first (--yes in a \
            script).
            """,
        subcommands: [RepairList.self, RepairRestore.self, RepairDelete.self],
        defaultSubcommand: RepairList.self)
}

struct RepairList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List what is set aside, by category, with the reasons.")

    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let listing = try session.list(withText: false)
            if json {
                try printJSON(
                    SetAsideCategory.all.map { category in
                        [
                            "category": category.identifier, "title": category.title,
                            "entries": listing.setAside.filter { $0.category == category }.map {
                                ["path": $0.path, "reason": $0.reason]
                            },
                        ] as [String: Any]
                    })
                return
            }
            if listing.setAside.isEmpty {
                streams.out("Nothing is set aside.")
                return
            }
            for category in SetAsideCategory.all {
                let items = listing.setAside.filter { $0.category == category }
                guard !items.isEmpty else { continue }
                streams.out("\(category.title) (\(items.count)):")
                for item in items { streams.out("  \(printable(item.path))\n      \(printable(item.reason))") }
            }
            streams.out("")
            streams.out(
                "`sempere repair restore <path>` makes an entry's text a note; `sempere repair delete <path>` deletes it."
            )
        }
    }
}

struct RepairRestore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Make a set-aside file's text a note of this device, then remove the file where this device may.")

    @Argument(help: "The set-aside file's path (as `sempere repair` shows it), or the start of its note id.")
    var path: String
    @Flag(name: .long("yes"), help: "Do not ask first.") var yes: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let entry = try session.setAsideEntry(path)
            let text = try session.setAsideText(entry)
            if !json || !yes {
                streams.err(
                    "\(printable(entry.path)) (\(entry.category.title)): \(printable(entry.reason))\n"
                        + "Its text starts: \(printable(VaultSession.title(of: text)))")
            }
            guard try confirm("Restore it as a note of this device?", yes: yes) else {
                throw failure("nothing was restored")
            }
            let restored = try session.repairRestore(entry)
            if json {
                try printJSON([
                    "id": VaultSession.noteID(restored.path), "path": restored.path,
                    "removed_set_aside": restored.removedSetAside,
                ])
                return
            }
            streams.out("Restored as note \(VaultSession.noteID(restored.path)).")
            if let reason = restored.keptBecause { streams.out("The set-aside file stays: \(printable(reason)).") }
        }
    }
}

struct RepairDelete: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a set-aside file, after asking.")

    @Argument(help: "The set-aside file's path (as `sempere repair` shows it), or the start of its note id.")
    var path: String
    @Flag(name: .long("yes"), help: "Do not ask first.") var yes: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let entry = try session.setAsideEntry(path)
            if !yes {
                streams.err("\(printable(entry.path)) (\(entry.category.title)): \(printable(entry.reason))")
            }
            guard try confirm("Delete it? It cannot be undone.", yes: yes) else {
                throw failure("nothing was deleted")
            }
            try session.repairDelete(entry)
            if json {
                try printJSON(["path": entry.path, "deleted": true])
                return
            }
            streams.out("Deleted \(printable(entry.path)).")
        }
    }
}

struct Reencrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reencrypt",
        abstract: "On home: Re-encrypt Everything under a new key, and replace the recovery kit.",
        discussion: """
            For when even old notes must stop opening with old keys (a removed device's, the old kit's). Every \
            note is written again under a new vault key that only the devices listed now and a new kit get, each \
            keeping its author's signature; the new kit is printed. With --with-current-kit (the current kit, \
            asked on the terminal) it happens now; without, the kit replacement waits the vault's \
            delay (72 hours), as any replacement by home alone, and the re-encryption runs when you run this \
            again after it. Stopped or killed, run it again: it goes on where it stopped (once it has finished, \
            running it again does nothing until a device change). The old files go once each device that wrote \
            them runs its next command.
            """)

    @Flag(name: .long("with-current-kit"), help: "The current kit co-signs: everything happens now.")
    var withCurrentKit: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions
    @OptionGroup var secret: SecretOptions

    func run() async throws {
        try reporting {
            var session = try options.session()
            let current = try currentKit(if: withCurrentKit, for: session, from: secret)
            let before = session.notices.count
            var bar: ProgressBar?
            var shown = 0
            let terminal = isatty(STDERR_FILENO) == 1
            let result = try session.reencryptEverything(currentKit: current) { progress in
                guard !json else { return }
                if terminal {
                    if bar == nil { bar = ProgressBar(total: progress.total, label: "re-encrypting") }
                    bar?.advance(by: progress.done - shown)
                    shown = progress.done
                } else {
                    streams.err("sempere: re-encrypted \(progress.done) of \(progress.total) notes")
                }
            }
            bar?.finish()
            printNotices(session, after: before)
            if let kit = result.kit, !json { printNewKit(kit, vaultID: session.body.vaultID) }
            if json {
                var out: [String: Any] = [
                    "reencrypted": result.count, "waiting_for_removal": result.waitingForRemoval,
                    "effective_at": result.effectiveAt.map { isoDate($0) } ?? "now",
                ]
                if let kit = result.kit { out["recovery_kit"] = kit.secretString }
                if let epoch = result.epoch { out["epoch"] = epoch }
                try printJSON(out)
            } else if let effective = result.effectiveAt {
                streams.out(
                    "The new kit takes effect at \(isoDate(effective)) (the vault's delay for a kit replaced by home "
                        + "alone; every device shows it meanwhile). Run `sempere reencrypt` on this device after that "
                        + "to re-encrypt every note. Until then the old keys still open everything they opened.")
            } else if result.alreadyDone {
                streams.out(
                    "Re-encrypt Everything already ran: every note is under epoch \(result.epoch ?? 0)'s key, and no "
                        + "device change came since. Nothing was done.")
            } else {
                streams.out(
                    "Re-encrypted \(result.count) note\(result.count == 1 ? "" : "s") under epoch \(result.epoch ?? 0)'s "
                        + "key, which only the devices listed now and the new kit get.")
                if result.waitingForRemoval.isEmpty {
                    streams.out("No file in the folder opens with an old key any more.")
                } else {
                    streams.out(
                        "\(result.waitingForRemoval.count) old file(s) still open with an old key; the device that "
                            + "wrote each removes it on its next sempere command, and then old keys open no note here:")
                    for path in result.waitingForRemoval.prefix(20) { streams.out("  \(path)") }
                }
            }
            if result.kit != nil {
                if !json { streams.out("Print the new kit now: it is shown only once; destroy the old one.") }
                try session.kitShown()
            }
        }
    }
}
