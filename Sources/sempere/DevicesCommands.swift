import CommandLineKit
import Foundation
import Sempere

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the vault's devices; on home, approve, remove and rename them, or hand the home role on.",
        subcommands: [
            DevicesList.self, DevicesApprove.self, DevicesRemove.self, DevicesRename.self, DevicesMakeHome.self,
        ])
}

struct DevicesList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the devices of the vault, and which one manages them.")

    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try options.session()
            let body = session.body
            if json {
                try printJSON([
                    "vault_id": body.vaultID, "generation": body.generation,
                    "devices": body.devices.map { device in
                        [
                            "id": device.id, "name": device.name, "home": device.id == body.home,
                            "this_device": device.id == session.keys.id, "added_in": device.addedIn,
                        ] as [String: Any]
                    },
                    "removed": body.removed.map {
                        ["id": $0.device.id, "name": $0.device.name, "removed_in": $0.removedIn]
                    },
                ])
                return
            }
            for device in body.devices {
                var notes: [String] = []
                if device.id == body.home { notes.append("Manages devices") }
                if device.id == session.keys.id { notes.append("this device") }
                let shown = printable(device.name)
                let name = shown.padding(toLength: max(shown.count, 16), withPad: " ", startingAt: 0)
                streams.out("\(name)  \(device.id.prefix(8))  \(notes.joined(separator: ", "))")
            }
        }
    }
}

struct DevicesApprove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "On home: approve the device whose join request shows these six words (or this code).",
        discussion: """
            With neither --words nor --code, the six words are asked for on the terminal, echo off (--secret-stdin \
            or --secret-env NAME in a script).
            """)

    @OptionalOption(name: .long("words"), help: "The six words the new device shows.") var words: String?
    @OptionalOption(name: .long("code"), help: "The code the new device shows (its QR code, as text).")
    var code: String?
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions
    @OptionGroup var secret: SecretOptions

    func validate() throws {
        if words != nil && code != nil {
            throw ValidationError("give --words \"<the new device's six words>\" or --code <its code>, not both")
        }
    }

    func run() async throws {
        try reporting {
            var session = try options.session()
            let check: JoinCheck =
                if let code { .code(code) } else {
                    .words(try words ?? secret.read("the six words the new device shows"))
                }
            let approved = try session.approve(check)
            let device = approved.device
            if json {
                try printJSON([
                    "device_id": device.id, "name": device.name, "words": approved.words.description,
                    "code": approved.code, "already_listed": approved.alreadyListed,
                ])
                return
            }
            streams.out(
                approved.alreadyListed
                    ? "\(device.name) (\(device.id.prefix(8))) was approved already; this is its new request. On "
                        + "\(device.name), type:"
                    : "Approved \(device.name) (\(device.id.prefix(8))). On \(device.name), type:")
            streams.out("")
            streams.out("    \(approved.words)")
            streams.out("")
            streams.out("    sempere join \(session.folder.url.path) --finish")
            streams.out("")
            streams.out("Or scan or paste this code there:")
            streams.out("")
            streams.out(terminalQR(Data(approved.code.utf8)))
            streams.out("    sempere join \(session.folder.url.path) --code \(approved.code)")
        }
    }
}

struct DevicesRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "On home: remove a device; notes written from now on use a key it never gets.")

    @Argument(help: "The device's name or the start of its id.") var device: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            var session = try options.session()
            let target = try session.device(matching: device)
            let before = session.notices.count
            try session.remove(device: target)
            printNotices(session, after: before)
            let epoch = session.body.currentEpoch.number
            if json {
                try printJSON(["device_id": target.id, "name": target.name, "epoch": epoch])
                return
            }
            streams.out(
                "Removed \(target.name) (\(target.id.prefix(8))). New notes use epoch \(epoch)'s key, which "
                    + "\(target.name) never gets; its old notes stay readable.")
        }
    }
}

struct DevicesRename: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "On home: rename a device.")

    @Argument(help: "The device's name or the start of its id.") var device: String
    @Argument(help: "The new name.") var newName: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func validate() throws {
        guard !newName.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw ValidationError("the new name is empty")
        }
    }

    func run() async throws {
        try reporting {
            var session = try options.session()
            let target = try session.device(matching: device)
            try session.rename(device: target, to: newName)
            if json {
                try printJSON(["device_id": target.id, "name": newName])
                return
            }
            streams.out("Renamed \(target.name) (\(target.id.prefix(8))) to \(newName).")
        }
    }
}

struct DevicesMakeHome: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "make-home",
        abstract: "On home: hand the home role to another listed device (Make Home); a new epoch starts.",
        discussion: """
            The device named manages the vault's devices from now on; this one stays listed as any other. Do \
            it before you retire this device. The vault gets a new key, as with any device change.
            """)

    @Argument(help: "The device's name or the start of its id.") var device: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            var session = try options.session()
            let target = try session.device(matching: device)
            let before = session.notices.count
            try session.makeHome(target)
            printNotices(session, after: before)
            let epoch = session.body.currentEpoch.number
            if json {
                try printJSON(["home": target.id, "name": target.name, "epoch": epoch])
                return
            }
            streams.out(
                "\(target.name) (\(target.id.prefix(8))) is home from now on: it manages the devices. New notes use "
                    + "epoch \(epoch)'s key.")
        }
    }
}
