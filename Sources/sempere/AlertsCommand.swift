import CommandLineKit
import Foundation
import Sempere

/// `sempere alerts`: the warnings this device shows on every command until the person acknowledges them (a
/// takeover of the vault, the guide's "Every other device shows an alert after a takeover").
struct Alerts: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alerts",
        abstract: "List the alerts shown on every command, or acknowledge them with --ack.",
        discussion: """
            An alert stays on every command until you acknowledge it: a takeover of the vault that another device \
            made is one. Read it, do what it says, then run `sempere alerts --ack`.
            """)

    @Flag(name: .long("ack"), help: "Acknowledge every alert: they are no longer shown.") var acknowledge: Bool
    @Flag(name: .long("json"), help: "Print the alerts as JSON.") var json: Bool
    @OptionGroup var options: VaultOptions

    func run() async throws {
        try reporting {
            var session = try VaultSession(
                configRoot: try options.configRoot(), folder: options.vault.map(absolutePath))
            // Every notice but the alerts themselves, which this command prints in full.
            for notice in session.notices where !notice.hasPrefix("ALERT ") {
                streams.err("sempere: warning: \(printable(notice))")
            }
            let alerts = session.alerts
            if acknowledge {
                let count = try session.acknowledgeAlerts()
                if json {
                    try printJSON(["acknowledged": count])
                } else {
                    streams.out(count == 0 ? "No alerts to acknowledge." : "Acknowledged \(count) alert(s).")
                }
                return
            }
            if json {
                try printJSON(alerts.map { ["id": $0.id, "text": $0.text, "raised_at": $0.raisedAt] as [String: Any] })
                return
            }
            guard !alerts.isEmpty else {
                streams.out("No alerts.")
                return
            }
            for alert in alerts {
                let date = Date(timeIntervalSince1970: TimeInterval(alert.raisedAt))
                streams.out("\(date.ISO8601Format()): \(printable(alert.text))")
            }
            streams.out("Acknowledge them with `sempere alerts --ack` once you have done what they say.")
        }
    }
}
