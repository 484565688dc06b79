import CommandLineKit
import Foundation
import Sempere

/// `sempere keys`: how this device's own keys are kept.
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Add, change or remove the passphrase of this device's keys.",
        discussion: """
            With a passphrase, this device's two keys are stored as age scrypt files (as `age -p` writes them), \
            so a copy of its configuration directory opens nothing without it. Every command then asks for it on \
            the terminal, echo off (or reads it from the variable --keys-passphrase-env names), once, and keeps the \
            opened keys in memory until it ends: there is no agent. The keys themselves never change.
            """,
        subcommands: [KeysPassphrase.self], defaultSubcommand: KeysPassphrase.self)
}

struct KeysPassphrase: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passphrase",
        abstract: "Set a passphrase for this device's keys (a new one, twice), or remove it with --remove.")

    @Flag(name: .long("remove"), help: "Store the keys without a passphrase again.") var remove: Bool
    @OptionalOption(
        name: .long("new-passphrase-env"),
        help: "Read the new passphrase from this environment variable, not the terminal (warned).")
    var newPassphraseEnvironment: String?
    @OptionGroup var options: ConfigOption

    func run() async throws {
        try reporting {
            let root = try options.configRoot()
            let protected = try VaultSession.keysAreProtected(configRoot: root)
            if remove && !protected {
                streams.out("This device's keys have no passphrase; nothing to remove.")
                return
            }
            // The keys open first (asking for the current passphrase, when they have one).
            _ = try VaultSession.deviceKeys(configRoot: root)
            let new =
                remove ? nil : try KeyPassphraseSource(environmentName: newPassphraseEnvironment).read(confirm: true)
            try VaultSession.setKeyPassphrase(configRoot: root, to: new)
            streams.out(
                remove
                    ? "This device's keys are stored without a passphrase now: anyone who can read "
                        + "\(DeviceState.keyStoreDirectory(root: root).path) can use them."
                    : protected
                        ? "The passphrase of this device's keys is changed."
                        : "This device's keys are protected by the passphrase now: every command asks for it.")
        }
    }
}
