import Foundation

/// A progress bar on standard error for long work (`[#########-----------]  45% importing 450/1000`),
/// redrawn in place. It draws only when standard error is a terminal, so scripts and `--json` output
/// never see it; `TERM=dumb` turns it off too.
public final class ProgressBar {
    private let total: Int
    private let label: String
    private let write: (String) -> Void
    private let enabled: Bool
    private var done = 0
    private var lastDrawn = -1

    /// - Parameters:
    ///   - enabled: nil decides from the environment (a terminal on standard error, `TERM` not "dumb").
    ///   - write: where the bar goes (standard error by default; tests capture it).
    public init(
        total: Int, label: String, enabled: Bool? = nil,
        write: @escaping (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }
    ) {
        self.total = max(total, 0)
        self.label = label
        self.write = write
        self.enabled =
            enabled ?? (isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb")
    }

    /// Counts `count` more items done and redraws when the percentage changed.
    public func advance(by count: Int = 1) {
        done = min(total, done + count)
        draw()
    }

    /// Completes the bar and ends its line.
    public func finish() {
        done = total
        draw()
        if enabled { write("\n") }
    }

    private func draw() {
        guard enabled, total > 0 else { return }
        let percent = done * 100 / total
        guard percent != lastDrawn else { return }
        lastDrawn = percent
        let width = 24
        let filled = done * width / total
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        write("\r[\(bar)] \(String(percent).leftPadded(to: 3))% \(label) \(done)/\(total)")
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: " ", count: length - count) + self
    }
}
