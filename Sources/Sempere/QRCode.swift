internal import CQREncode
import Foundation

/// A QR code of a payload, made by libqrencode, to show in a terminal or save as an image.
///
/// The join request shows one beside its six words (docs/sempere-join-words.md); the payload is what a
/// user could paste instead of typing the words. Owns libqrencode's `QRcode`, freed in `deinit`.
public final class QRCode: @unchecked Sendable {
    // @unchecked Sendable: `code` is written once by libqrencode in init and only read afterwards;
    // nothing mutates it until QRcode_free in deinit.
    private let code: UnsafeMutablePointer<QRcode>

    /// Error correction level (ISO/IEC 18004): the share of the code that can be damaged.
    public enum ErrorCorrection: Sendable {
        /// About 7 %.
        case low
        /// About 15 % (the default).
        case medium
        /// About 25 %.
        case quartile
        /// About 30 %.
        case high

        var level: QRecLevel {
            switch self {
            case .low: QR_ECLEVEL_L
            case .medium: QR_ECLEVEL_M
            case .quartile: QR_ECLEVEL_Q
            case .high: QR_ECLEVEL_H
            }
        }
    }

    /// The QR code of `payload`, in byte mode, in the smallest version that holds it.
    ///
    /// - Throws: ``SempereError/Code/qrEncoding`` when the payload is empty or too long for any version
    ///   (at most 2331 bytes at `.medium`).
    public init(_ payload: some DataProtocol, errorCorrection: ErrorCorrection = .medium) throws {
        let bytes = [UInt8](payload)
        guard !bytes.isEmpty else {
            throw SempereError(.qrEncoding, "a QR code needs a payload of at least one byte")
        }
        errno = 0
        let made = bytes.withUnsafeBufferPointer {
            QRcode_encodeData(Int32($0.count), $0.baseAddress, 0, errorCorrection.level)
        }
        guard let made else {
            let reason =
                errno == ERANGE
                ? "the payload (\(bytes.count) bytes) is too long for a QR code" : String(cString: strerror(errno))
            throw SempereError(.qrEncoding, "libqrencode could not encode the payload: \(reason)")
        }
        guard made.pointee.width > 0, made.pointee.data != nil else {
            QRcode_free(made)
            throw SempereError(.qrEncoding, "libqrencode returned an empty QR code")
        }
        code = made
    }

    /// The QR code of a text payload (its UTF-8 bytes).
    public convenience init(text: String, errorCorrection: ErrorCorrection = .medium) throws {
        try self.init(Data(text.utf8), errorCorrection: errorCorrection)
    }

    deinit { QRcode_free(code) }

    /// The QR version (1–40).
    public var version: Int { Int(code.pointee.version) }

    /// Modules per side, without the quiet zone.
    public var width: Int { Int(code.pointee.width) }

    /// Whether the module at (`row`, `column`) is dark; outside the code (the quiet zone) is light.
    public func isDark(row: Int, column: Int) -> Bool {
        guard (0..<width).contains(row), (0..<width).contains(column) else { return false }
        // libqrencode: bit 0 of each byte is 1 for a dark module.
        return code.pointee.data[row * width + column] & 1 == 1
    }

    /// How ``terminalText(style:quietZone:invert:)`` draws the code.
    public enum TerminalStyle: Sendable {
        /// Two rows of modules per line with the Unicode half blocks ▀ ▄ █, each module one column wide.
        case halfBlocks
        /// Plain ASCII for terminals without Unicode: one row per line, each module two columns (`##`).
        case ascii
    }

    /// The code as lines of terminal text, each ended by "\n".
    ///
    /// - Parameters:
    ///   - quietZone: light modules around the code (the standard asks for 4; scanners read 2).
    ///   - invert: by default light modules are drawn as ink and dark ones as blank, which reads correctly
    ///     on the usual light-on-dark terminal; `invert` draws dark modules as ink, for dark-on-light ones.
    public func terminalText(style: TerminalStyle = .halfBlocks, quietZone: Int = 2, invert: Bool = false) -> String {
        let quiet = max(0, quietZone)
        let range = -quiet..<(width + quiet)
        func ink(_ row: Int, _ column: Int) -> Bool { isDark(row: row, column: column) == invert }
        var text = ""
        switch style {
        case .halfBlocks:
            for top in stride(from: range.lowerBound, to: range.upperBound, by: 2) {
                for column in range {
                    let upper = ink(top, column)
                    // An odd last row pairs with a row outside the quiet zone: drawn blank.
                    let lower = top + 1 < range.upperBound && ink(top + 1, column)
                    text += upper ? (lower ? "█" : "▀") : (lower ? "▄" : " ")
                }
                text += "\n"
            }
        case .ascii:
            for row in range {
                for column in range { text += ink(row, column) ? "##" : "  " }
                text += "\n"
            }
        }
        return text
    }

    /// The code as an SVG image: one unit per module, a quiet zone of `quietZone` modules, dark modules as
    /// one black path, so it prints sharply at any size.
    public func svg(quietZone: Int = 4, size: String = "60mm") -> String {
        let quiet = max(0, quietZone)
        let modules = width + 2 * quiet
        var path = ""
        for row in 0..<width {
            for column in 0..<width where isDark(row: row, column: column) {
                path += "M\(column + quiet),\(row + quiet)h1v1h-1z"
            }
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(modules) \(modules)" width="\(size)" height="\(size)" \
            shape-rendering="crispEdges"><rect width="\(modules)" height="\(modules)" fill="#fff"/>\
            <path d="\(path)" fill="#000"/></svg>
            """
    }

    /// The code as a binary PBM image (netpbm "P4"): dark modules black, a quiet zone of `quietZone`
    /// modules, each module `scale` × `scale` pixels.
    public func pbm(scale: Int = 4, quietZone: Int = 4) -> Data {
        let scale = max(1, scale)
        let quiet = max(0, quietZone)
        let modules = width + 2 * quiet
        let pixels = modules * scale
        var data = Data("P4\n\(pixels) \(pixels)\n".utf8)
        let rowBytes = (pixels + 7) / 8
        for y in 0..<pixels {
            var row = [UInt8](repeating: 0, count: rowBytes)
            for x in 0..<pixels where isDark(row: y / scale - quiet, column: x / scale - quiet) {
                row[x / 8] |= 0x80 >> UInt8(x % 8)
            }
            data.append(contentsOf: row)
        }
        return data
    }
}
