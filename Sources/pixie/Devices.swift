import CommandLineKit
import Foundation
import PixieDevice

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices", abstract: "List the account's devices, or remove one.",
        subcommands: [DevicesList.self, DevicesRemove.self], defaultSubcommand: DevicesList.self)
}

struct DevicesRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove one other device, and rotate every key it held.",
        discussion: """
            The named device loses its session, its passkey and its place in the roster; this device makes the \
            account's new signing and discovery keys and a new BackupKey, seals them to every device that stays, and \
            the server logs the rotation before it answers. The removed device keeps what it already had, and nothing \
            after (docs/pixie-protocol.md, "Revoking a device").
            """)

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Argument(help: "The name of the device to remove, as `pixie devices` lists it.") var name: String

    func run() async throws {
        try await reporting {
            let opened = try openHome(home)
            let context = try DeviceContext(home: opened, environment: deviceEnvironment(opened))
            let removal = try await context.removeDevice(named: name)
            streams.out(
                "Removed \"\(removal.removedName)\" (\(removal.removedDeviceID)). The account's keys were rotated "
                    + "(epoch \(removal.epoch)) and sealed to \(removal.bundles) device"
                    + "\(removal.bundles == 1 ? "" : "s") that stay\(removal.bundles == 1 ? "s" : "").")
        }
    }
}

struct DevicesList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the account's devices, checked against the transparency log.")

    @Option(name: .long("home"), help: "This device's directory.") var home: String
    @Flag(name: .long("json"), help: "Print the list as JSON.") var json: Bool

    func run() async throws {
        try await reporting {
            let devices = try await onboardingFlow(try openHome(home)).devices()
            if json {
                try printJSON(
                    devices.map {
                        [
                            "device_id": $0.deviceID, "name": $0.name, "family": $0.family ?? NSNull(),
                            "this_device": $0.isThisDevice,
                            "added_at": $0.addedAt.map { Int64($0.timeIntervalSince1970) } ?? NSNull(),
                            "added_by": $0.addedBy ?? NSNull(),
                            "last_seen_at": $0.lastSeenAt.map { Int64($0.timeIntervalSince1970) } ?? NSNull(),
                        ] as [String: Any]
                    })
                return
            }
            let names = Dictionary(devices.map { ($0.deviceID, $0.name) }, uniquingKeysWith: { first, _ in first })
            for device in devices {
                let family = device.family.map { " (\($0))" } ?? ""
                streams.out(
                    "\(device.name)\(family)  \(device.deviceID)\(device.isThisDevice ? "  (this device)" : "")")
                var added = device.addedAt.map { "added \(Self.format($0))" } ?? "added before this was recorded"
                if let by = device.addedBy { added += " by \(names[by] ?? "a device since removed")" }
                let seen =
                    device.lastSeenAt.map { "last seen \(Self.format($0))" } ?? "not seen since this was recorded"
                streams.out("    \(added); \(seen)")
            }
            streams.out("\(devices.count) device\(devices.count == 1 ? "" : "s"), matching the transparency log.")
        }
    }
}

extension DevicesList {
    /// A time for people: UTC, to the minute.
    static func format(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }
}
