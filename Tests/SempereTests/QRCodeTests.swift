import Foundation
import Sempere
import Testing

/// The QR codes are read back by a decoder no one here wrote: Debian's zbarimg (zbar-tools).
@Suite struct QRCodeTests {
    static func zbar(_ code: QRCode, scale: Int = 4) throws -> String {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = directory.appendingPathComponent("code.pbm")
        try code.pbm(scale: scale).write(to: image)
        let run = try runTool("/usr/bin/zbarimg", ["--quiet", "--raw", "-Sbinary", image.path], install: "zbar-tools")
        #expect(run.status == 0, "zbarimg: \(run.stderr)")
        return String(decoding: run.stdout, as: UTF8.self)
    }

    @Test func zbarReadsThePayloadBack() throws {
        let payloads = [
            "sempere-join:v1:person-hall-golf-dabble-vein-mind",
            "x",
            String(repeating: "SEMPERE0123456789", count: 40),
            "ünïcödé ✓ join",
        ]
        for payload in payloads {
            for level in [QRCode.ErrorCorrection.low, .medium, .quartile, .high] {
                let code = try QRCode(text: payload, errorCorrection: level)
                #expect(try Self.zbar(code) == payload, "\(level)")
            }
        }
    }

    @Test func pbmShape() throws {
        let code = try QRCode(text: "hello")
        #expect(code.version == 1)
        #expect(code.width == 21)
        let pbm = code.pbm(scale: 3, quietZone: 4)
        let side = (21 + 8) * 3
        let header = Data("P4\n\(side) \(side)\n".utf8)
        #expect(pbm.prefix(header.count) == header)
        #expect(pbm.count == header.count + side * ((side + 7) / 8))
    }

    /// The terminal text, read back module by module, is the code (with its quiet zone).
    @Test func terminalTextMatchesTheModules() throws {
        let code = try QRCode(text: "sempere-join:v1:terminal")
        for quiet in [0, 1, 2, 4] {
            let size = code.width + 2 * quiet
            for invert in [false, true] {
                let lines = code.terminalText(style: .halfBlocks, quietZone: quiet, invert: invert)
                    .split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                #expect(lines.count == (size + 1) / 2)
                let ascii = code.terminalText(style: .ascii, quietZone: quiet, invert: invert)
                    .split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                #expect(ascii.count == size)
                #expect(ascii.allSatisfy { $0.utf8.allSatisfy { $0 == UInt8(ascii: "#") || $0 == UInt8(ascii: " ") } })
                for row in 0..<size {
                    let cells = Array(lines[row / 2])
                    #expect(cells.count == size)
                    let asciiCells = Array(ascii[row])
                    for column in 0..<size {
                        let ink = code.isDark(row: row - quiet, column: column - quiet) == invert
                        let cell = cells[column]
                        let drawn = row % 2 == 0 ? (cell == "█" || cell == "▀") : (cell == "█" || cell == "▄")
                        #expect(drawn == ink)
                        #expect((asciiCells[2 * column] == "#") == ink)
                    }
                }
            }
        }
    }

    @Test func refusesWhatItCannotEncode() {
        expectSempereError(.qrEncoding) { try QRCode(Data()) }
        expectSempereError(.qrEncoding) { try QRCode(Data(repeating: 0x41, count: 3000)) }
    }
}
