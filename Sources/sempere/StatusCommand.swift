import CommandLineKit
import Foundation
import Sempere

/// `sempere status`: the vault at a glance.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show this device, home, the epoch, the devices, alerts, and what is pending or set aside.")

    @Flag(name: .long("json"), help: "Print the status as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            let session = try VaultSession(
                configRoot: try options.configRoot(), folder: options.vault.map(absolutePath))
            let status = try session.status()
            if json {
                try printJSON(
                    [
                        "folder": status.folder, "vault_id": status.vaultID,
                        "this_device": status.thisDevice.map { ["id": $0.id, "name": $0.name] } ?? NSNull(),
                        "home": status.home.map { ["id": $0.id, "name": $0.name] } ?? NSNull(),
                        "epoch": status.epoch,
                        "devices": status.devices.map { ["id": $0.id, "name": $0.name] },
                        "alerts": status.alerts.map { ["id": $0.id, "text": $0.text, "raised_at": $0.raisedAt] },
                        "notes": status.notes, "conflicts": status.conflicts,
                        "pending": status.pending.map { ["id": $0.id, "path": $0.path, "reason": $0.reason] },
                        "waiting_for_sync": status.waitingForSync,
                        "set_aside": Dictionary(
                            uniqueKeysWithValues: status.setAside.map { ($0.category.identifier, $0.count) }),
                        "kit_replacement_at": status.kitReplacementAt ?? NSNull(),
                        "reencryption_under_way": status.reencryptionUnderWay ?? NSNull(),
                        "notices": status.notices,
                    ] as [String: Any])
                return
            }
            func named(_ device: VaultBody.Device) -> String { "\(printable(device.name)) (\(device.id.prefix(8)))" }
            streams.out("Vault        \(printable(status.folder))")
            if let me = status.thisDevice {
                let role = me.id == status.home?.id ? "manages devices" : "follows the list home signs"
                streams.out("This device  \(named(me)), \(role)")
            } else {
                streams.out(
                    "This device  removed from the vault (`sempere export --unsynced <folder>` saves its notes)")
            }
            streams.out("Home         \(status.home.map(named) ?? "none listed")")
            streams.out("Epoch        \(status.epoch)")
            let others = status.devices.map { device -> String in
                var name = named(device)
                if device.id == status.home?.id { name += " home" }
                if device.id == status.thisDevice?.id { name += " this" }
                return name
            }
            streams.out("Devices      \(status.devices.count): \(others.joined(separator: ", "))")
            var notes = "\(status.notes) shown"
            if status.conflicts > 0 { notes += ", \(status.conflicts) in conflict (`sempere ls` names them)" }
            if !status.pending.isEmpty {
                notes += ", \(status.pending.count) pending"
                if status.waitingForSync > 0 { notes += " (\(status.waitingForSync) waiting for sync)" }
            }
            let setAside = status.setAside.reduce(0) { $0 + $1.count }
            if setAside > 0 {
                notes +=
                    ", \(setAside) set aside ("
                    + status.setAside.map { "\($0.category.title) \($0.count)" }.joined(separator: ", ")
                    + "; `sempere repair`)"
            }
            streams.out("Notes        \(notes)")
            if let at = status.kitReplacementAt {
                let date = Date(timeIntervalSince1970: TimeInterval(at)).ISO8601Format()
                streams.out("Kit          a replacement of the recovery kit takes effect at \(date)")
            }
            if let epoch = status.reencryptionUnderWay {
                streams.out("Re-encrypt   under way into epoch \(epoch) (home finishes it with `sempere reencrypt`)")
            }
            if status.alerts.isEmpty {
                streams.out("Alerts       none")
            } else {
                streams.out("Alerts       \(status.alerts.count): `sempere alerts` shows them, `--ack` once done")
                for alert in status.alerts { streams.out("  ! \(printable(alert.text))") }
            }
            for notice in status.notices where !notice.hasPrefix("ALERT ") {
                streams.out("Note         \(printable(notice))")
            }
        }
    }
}
