import CommandLineKit
import Foundation
import Sempere

struct Takeover: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "takeover",
        abstract: "Take the vault over with the recovery kit when home is lost: this device becomes home.",
        discussion: """
            The kit is asked for on the terminal (echo off); with --passphrase-copy, it is opened from the \
            vault's recovery.age with its passphrase, asked the same way. In a script, --secret-stdin reads it \
            from standard input and --secret-env NAME from an environment variable. \
            --keep names the devices you still have (names or id starts, comma-separated; "" keeps none but \
            this one): every other device is removed, and a new epoch starts that only the kept devices and \
            the kit can read. The takeover wins over any change from the old home it did not see; devices \
            the old home added since must be approved again. A device that is not in the vault (one with \
            nothing but the kit) joins it as home under --name.
            """)

    @Argument(help: "The vault folder, as synced to this device.") var folder: String
    @OptionalOption(name: .long("keep"), help: "The devices you still have, comma-separated (\"\" for none).")
    var keep: String?
    @OptionalOption(name: .long("name"), help: "This device's name, when it is not in the vault yet.")
    var name: String?
    @Flag(name: .long("passphrase-copy"), help: "Read the kit from the vault's passphrase copy (recovery.age).")
    var passphraseCopy: Bool
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: ConfigOption
    @OptionGroup var secret: SecretOptions

    func run() async throws {
        try reporting {
            let path = absolutePath(folder)
            let url = URL(fileURLWithPath: path)
            let unverified = try VaultFolder(url: url).unverifiedVault()
            guard let keep else {
                streams.err("The devices vault.json lists (not yet checked against the kit):")
                for device in unverified.body.devices { streams.err("  \(device.name)  \(device.id.prefix(8))") }
                throw failure(
                    "say which devices you still have: --keep \"Mac,Phone\" (names from the list above), or --keep "
                        + "\"\" to keep none but this one; every other device is removed")
            }
            let kit = try readKit(vaultID: unverified.body.vaultID, folder: url)
            let kept = keep.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            let session = try VaultSession.takeOver(
                folder: url, kit: kit, name: name, keep: kept, configRoot: try options.configRoot())
            printNotices(session, after: 0)
            let body = session.body
            if json {
                try printJSON([
                    "home": session.keys.id, "devices": body.devices.map(\.name),
                    "takeover_generation": body.takeoverGeneration, "epoch": body.currentEpoch.number,
                ])
                return
            }
            streams.out(
                "Took the vault over: this device, \(session.name(of: session.keys.id)), is home now. Kept: "
                    + body.devices.map(\.name).joined(separator: ", ") + ". New notes use epoch "
                    + "\(body.currentEpoch.number)'s key, which only these devices and the kit get.")
            streams.out(
                "Every other device shows an alert on its next command. Devices not kept must join again.")
        }
    }

    func readKit(vaultID: String, folder: URL) throws -> RecoveryKit {
        if passphraseCopy {
            guard
                let file = FileManager.default.contents(
                    atPath: folder.appendingPathComponent(VaultFolder.recoveryFile).path)
            else {
                throw failure("this vault has no passphrase copy (recovery.age): give the paper kit instead")
            }
            return try RecoveryKit(
                passphraseCopy: file, passphrase: try secret.read("the passphrase of the passphrase copy"),
                vaultID: vaultID)
        }
        return try RecoveryKit(secretString: try secret.read("the recovery kit (SEMPERE-KIT-1...)"), vaultID: vaultID)
    }
}
