import CommandLineKit
import Foundation
import Sempere

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a vault in a folder, with this device as its home, and print the recovery kit.",
        discussion: """
            Makes this device's keys (once), the vault and its folder layout, and prints the recovery kit: its \
            secret and a QR code of it. The kit is shown only now and never stored: print it or write it down. \
            With --passphrase-copy, a copy of the recovery key is also kept in the vault as recovery.age, \
            encrypted with a passphrase asked for on the terminal (twice, echo off; --secret-stdin or \
            --secret-env NAME in a script): at least 16 characters, since the storage provider can try guesses against that copy offline. The \
            folder must not hold notes of another vault.
            """)

    @Argument(help: "The folder to hold the vault (for example inside a synced folder).") var folder: String
    @Option(name: .long("name"), help: "This device's name, as the device list shows it.") var name: String
    @Flag(name: .long("post-quantum"), help: "Use post-quantum (X-Wing) keys for the vault and this device.")
    var postQuantum: Bool
    @Flag(name: .long("passphrase-copy"), help: "Keep a passphrase-encrypted copy of the recovery key in the vault.")
    var passphraseCopy: Bool
    @Flag(
        name: .long("protect-keys"),
        help: "Protect this device's keys with a passphrase (asked twice; then asked by every command).")
    var protectKeys: Bool
    @OptionalOption(
        name: .long("unwrap-key-plugin"),
        help: "Keep this device's unwrap key in an age plugin (a YubiKey, a TPM): the identity file it wrote.")
    var unwrapKeyPlugin: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: ConfigOption
    @OptionGroup var secret: SecretOptions

    func validate() throws {
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--name is empty") }
        if unwrapKeyPlugin != nil && postQuantum {
            throw ValidationError(
                "--unwrap-key-plugin and --post-quantum do not go together: an age plugin's key is classical")
        }
    }

    func run() async throws {
        try reporting {
            let path = absolutePath(folder)
            try options.protectNewKeys(protectKeys)
            try options.keepUnwrapKey(inPlugin: unwrapKeyPlugin)
            let passphrase =
                passphraseCopy ? try secret.read("a passphrase for the passphrase copy", confirm: true) : nil
            let (session, kit) = try VaultSession.create(
                folder: URL(fileURLWithPath: path), homeName: name, postQuantum: postQuantum, passphrase: passphrase,
                configRoot: try options.configRoot())
            let vaultID = session.body.vaultID
            let secret = kit.secretString
            if json {
                try printJSON([
                    "vault_id": vaultID, "folder": path, "device_id": session.keys.id, "device_name": name,
                    "recovery_kit": secret, "passphrase_copy": passphrase != nil,
                ])
                try session.kitShown()
                return
            }
            streams.out("Created the vault \(vaultID) in \(path).")
            streams.out("This device, \(name) (\(session.keys.id.prefix(8))), is its home: it manages devices.")
            streams.out("")
            streams.out("RECOVERY KIT for vault \(vaultID)")
            streams.out("")
            streams.out("    \(secret)")
            streams.out("")
            streams.out(terminalQR(Data(secret.utf8)))
            streams.out(
                "Print this page or write the kit down now, and keep it as safe as your notes: it is shown only "
                    + "once and stored nowhere. With it and your files, anyone can read everything.")
            if passphrase != nil {
                streams.out("A passphrase copy of the recovery key is in \(path)/recovery.age.")
            }
            streams.out("")
            streams.out("Next: `sempere new <title>` writes a note; `sempere join \(path) --name <device>` on another")
            streams.out("device asks to join, and `sempere devices approve --words \"...\"` here approves it.")
            try session.kitShown()
        }
    }
}

struct Kit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kit", abstract: "The recovery kit: print it again from its passphrase copy, or replace it.",
        subcommands: [KitPrint.self, KitReplace.self])
}

struct KitPrint: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "print",
        abstract: "Print the recovery kit again, from the passphrase copy in the vault (recovery.age).",
        discussion: """
            The kit itself is stored nowhere: `sempere create` shows it once. If that command (or `kit replace`) \
            stopped before showing it, this shows it, with no passphrase. Otherwise, if the vault has a passphrase copy \
            (`create --passphrase-copy`), this opens it with its passphrase (asked on the terminal, echo off; \
            --secret-stdin or --secret-env NAME in a script) and prints the kit again; --html writes a printable page (print it, then \
            delete the file).
            """)

    @OptionalOption(name: .long("html"), help: "Also write the printable kit page to this file (0600).")
    var html: String?
    @OptionGroup var options: VaultOptions
    @OptionGroup var secret: SecretOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let unshown = try session.unshownKit()
            let kit =
                try unshown ?? session.recoveryKit(passphrase: try secret.read("the passphrase of the passphrase copy"))
            if let html {
                let url = URL(fileURLWithPath: absolutePath(html))
                // The page holds the kit's secret: never in the synced folder, never over another file.
                try session.checkOutsideVault(file: url)
                try writeNewPrivateFile(Data(try kit.page().utf8), to: url)
                streams.err("sempere: wrote the kit page to \(url.path): print it, then delete the file")
            }
            streams.out("RECOVERY KIT for vault \(session.body.vaultID)")
            streams.out("")
            streams.out("    \(kit.secretString)")
            streams.out("")
            streams.out(terminalQR(Data(kit.secretString.utf8)))
            if unshown != nil {
                streams.out(
                    "This is the kit the last `sempere create` or `sempere kit replace` here made, which stopped "
                        + "before showing it. Print it or write it down now: this device keeps it no longer.")
                try session.kitShown()
            }
        }
    }
}

struct KitReplace: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replace",
        abstract: "On home: replace the recovery kit, and print the new one.",
        discussion: """
            With --with-current-kit (the current kit's secret, asked on the terminal), the \
            replacement is immediate: a new epoch starts whose key the old kit never gets. Without it, the \
            replacement takes effect after the vault's delay (72 hours): every device shows it meanwhile, and \
            the current kit can still take over, which cancels it. So a stolen home cannot kill your paper kit \
            without every device saying so first. The passphrase copy (recovery.age), if any, is of the old \
            kit and is not replaced.
            """)

    @Flag(name: .long("with-current-kit"), help: "The current kit co-signs: the replacement is immediate.")
    var withCurrentKit: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions
    @OptionGroup var secret: SecretOptions

    func run() async throws {
        try reporting {
            var session = try options.session()
            let current = try currentKit(if: withCurrentKit, for: session, from: secret)
            let before = session.notices.count
            let replaced = try session.replaceKit(currentKit: current)
            printNotices(session, after: before)
            let secret = replaced.kit.secretString
            if json {
                try printJSON([
                    "recovery_kit": secret, "effective_at": replaced.effectiveAt.map { isoDate($0) } ?? "now",
                ])
                try session.kitShown()
                return
            }
            printNewKit(replaced.kit, vaultID: session.body.vaultID)
            if let effective = replaced.effectiveAt {
                streams.out(
                    "It takes effect at \(isoDate(effective)), when this device next runs a command; until then the "
                        + "current kit still works, and every device shows the replacement. Print the new kit now: "
                        + "it is shown only once.")
            } else {
                streams.out(
                    "It is in effect now: new notes use epoch \(session.body.currentEpoch.number)'s key, which the old "
                        + "kit never gets. Print the new kit now: it is shown only once; destroy the old one.")
            }
            try session.kitShown()
        }
    }
}
