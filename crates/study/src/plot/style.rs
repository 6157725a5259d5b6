//! What every chart shares: its colours ([`Rgb`], the [`PALETTE`]), its font (DejaVu Sans,
//! embedded, registered once) and its legend box; and drawing errors as `anyhow` ones.

use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// A colour as red, green, blue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub(crate) fn rgb(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }

    /// `#rrggbb`, as an SVG writes it.
    pub fn hex(self) -> String {
        format!("#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// The colours of the charts' series in turn (matplotlib's and seaborn's `tab10`), so
/// that curves read as they do in vLLM's figures.
pub const PALETTE: [Rgb; 10] = [
    Rgb(0x1f, 0x77, 0xb4),
    Rgb(0xff, 0x7f, 0x0e),
    Rgb(0x2c, 0xa0, 0x2c),
    Rgb(0xd6, 0x27, 0x28),
    Rgb(0x94, 0x67, 0xbd),
    Rgb(0x8c, 0x56, 0x4b),
    Rgb(0xe3, 0x77, 0xc2),
    Rgb(0x7f, 0x7f, 0x7f),
    Rgb(0xbc, 0xbd, 0x22),
    Rgb(0x17, 0xbe, 0xcf),
];

/// The font family every chart's text uses; [`register_font`] gives it DejaVu Sans.
pub(crate) const FONT: &str = "sans-serif";

/// Gives plotters' `sans-serif` family the embedded DejaVu Sans, once per process: text
/// is laid out (SVG and PNG) and rasterised (PNG) with it, whatever fonts the system has.
pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // DejaVu Sans is a valid TrueType font: registering it cannot fail.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// A drawing error as an `anyhow` one (plotters' errors borrow nothing but are generic
/// over the backend).
pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the chart: {e}")
}

/// Draws a chart's legend in the style every figure shares (a white, bordered box).
pub(crate) fn draw_legend<'a, 'b, DB, CT>(
    labels: &mut plotters::chart::SeriesLabelStyle<'a, 'b, DB, CT>,
    font_size: u32,
) -> Result<()>
where
    DB: plotters::prelude::DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    use plotters::prelude::*;
    labels
        .label_font((FONT, font_size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_err)
}
