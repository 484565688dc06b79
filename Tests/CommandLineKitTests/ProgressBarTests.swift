import CommandLineKit
import Foundation
import Testing

@Suite("ProgressBar")
struct ProgressBarTests {
    final class Capture: @unchecked Sendable {
        var text = ""
    }

    @Test("draws in place as the percentage changes, and ends the line when finished")
    func draws() {
        let capture = Capture()
        let bar = ProgressBar(total: 4, label: "importing", enabled: true) { capture.text += $0 }
        bar.advance()
        bar.advance()
        bar.advance(by: 2)
        bar.finish()
        #expect(capture.text.contains("\r[######------------------]  25% importing 1/4"))
        #expect(capture.text.contains("\r[########################] 100% importing 4/4"))
        #expect(capture.text.hasSuffix("\n"))
        #expect(capture.text.components(separatedBy: "100%").count == 2)  // not redrawn when unchanged
    }

    @Test("draws nothing when disabled (not a terminal)")
    func disabled() {
        let capture = Capture()
        let bar = ProgressBar(total: 10, label: "x", enabled: false) { capture.text += $0 }
        bar.advance(by: 5)
        bar.finish()
        #expect(capture.text.isEmpty)
    }
}
