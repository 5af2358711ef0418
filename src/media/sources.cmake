# The media units: decoding images (libpng, libjpeg-turbo, libwebp) and cutting them into patches.
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(JPEG REQUIRED IMPORTED_TARGET libjpeg)
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
set(UFORM_MEDIA_SOURCES src/media/image.c src/media/grid.c)
set(UFORM_MEDIA_LIBRARIES PkgConfig::PNG PkgConfig::JPEG PkgConfig::WEBP)
